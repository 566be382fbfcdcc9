package schedtest

import (
	"strconv"

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
