package schedtest

import (
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// BenchSlice is the NodeResourceSlice of Kubernetes' DRA scheduler
// benchmarks, which BenchmarkDRA and the scheduler's own DRA benchmark
// use: devices whole instances named by BenchInstance, with the common
// attributes model A100, family GPU, driverVersion 1.2.3 and memory 1Gi,
// and a per-instance numa.
func BenchSlice(node, driver string, devices int) *resourceapi.NodeResourceSlice {
	str := func(s string) resourceapi.AttributeValue { return resourceapi.AttributeValue{String: &s} }
	mem := resource.MustParse("1Gi")
	version := "1.2.3"
	common := resourceapi.AttributeGroup{Name: "a100", Attributes: []resourceapi.Attribute{
		{Name: "model", AttributeValue: str("A100")},
		{Name: "family", AttributeValue: str("GPU")},
		{Name: "driverVersion", AttributeValue: resourceapi.AttributeValue{Version: &version}},
		{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: &mem}},
	}}
	s := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver}}
	s.Spec.NodeName, s.Spec.DriverName = node, driver
	s.Spec.Partitionable = &resourceapi.PartitionableResources{CommonAttributes: []resourceapi.AttributeGroup{common}}
	for i := range devices {
		numa := int64(i)
		s.Spec.Partitionable.ResourceInstances = append(s.Spec.Partitionable.ResourceInstances, resourceapi.ResourceInstance{
			Name: BenchInstance(i), CommonAttributesRefs: []string{common.Name},
			Attributes: []resourceapi.Attribute{{Name: "numa", AttributeValue: resourceapi.AttributeValue{Int: &numa}}},
		})
	}
	return s
}

// BenchInstance names instance i of a BenchSlice.
func BenchInstance(i int) string { return "instance-" + strconv.Itoa(i) }

// BenchResourceSlice is BenchSlice as a resource.k8s.io/v1 ResourceSlice:
// one pool named after the node, devices named by BenchInstance with the
// attributes model A100, family GPU, driverVersion 1.2.3 and numa, and
// the capacity memory 1Gi (what the seed projection makes of BenchSlice's
// quantity attribute), so the same selectors select the same devices.
func BenchResourceSlice(node, driver string, devices int) *resourcev1.ResourceSlice {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	version := "1.2.3"
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver}}
	s.Spec.Driver, s.Spec.NodeName = driver, &node
	s.Spec.Pool = resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
	for i := range devices {
		numa := int64(i)
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: BenchInstance(i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model": str("A100"), "family": str("GPU"),
				"driverVersion": {VersionValue: &version}, "numa": {IntValue: &numa},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("1Gi")}},
		})
	}
	return s
}
