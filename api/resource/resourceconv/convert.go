// Package resourceconv converts ResourceClaims and ResourceClaimTemplates
// between the two resource.k8s.io versions allot serves: the seeds'
// v1alpha2 and Kubernetes' v1.
//
// The two claim specs share no field: a v1alpha2 claim names a
// ResourceClass and a separate parameters object, a v1 claim lists its
// device requests inline. So the API server stores every claim and
// template in the version it was written in, and a read through the other
// version gets a view made here: the object's metadata (with
// [resourcev1alpha2.StoredVersionAnnotation] naming the stored version),
// an empty spec, and the status as far as the other version can express
// it (reservedFor, and the allocated devices by the naming rule of
// [SeedDeviceName]). Views are pure functions of the stored object; writes
// through a view may change only metadata (see docs/decisions.md).
//
// DriverHandle is the other direction on a node: what a v1 claim's
// allocation gives one driver, in the form drivers of allot's DRA node
// API get (the node agent and the driver SDK's kubelet mode both build it).
package resourceconv

import (
	"encoding/json"
	"fmt"
	"strings"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// SeedRequestName is the request name of every device result in the v1
// view of a v1alpha2 claim's structured allocation: v1alpha2 results do
// not record which of the parameters' requests they satisfy.
const SeedRequestName = "v1alpha2"

// SeedDeviceName is the v1 device name of a seed NodeResourceSlice's
// instance: its instance ID with every "/" replaced by "--" (gpu0/mig/a
// becomes gpu0--mig--a). The pool of a seed device is its node's name.
func SeedDeviceName(instanceID string) string {
	return strings.ReplaceAll(instanceID, "/", "--")
}

// SeedInstanceID inverts SeedDeviceName.
func SeedInstanceID(device string) string {
	return strings.ReplaceAll(device, "--", "/")
}

var (
	v1GV       = resourcev1.SchemeGroupVersion
	v1alpha2GV = resourcev1alpha2.SchemeGroupVersion
)

// Convert returns the view of obj (a ResourceClaim or
// ResourceClaimTemplate of either version) in version to; an object
// already in that version is returned as it is.
func Convert(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
	switch o := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		switch to {
		case v1alpha2GV:
			return o, nil
		case v1GV:
			return ClaimToV1(o), nil
		}
	case *resourcev1.ResourceClaim:
		switch to {
		case v1GV:
			return o, nil
		case v1alpha2GV:
			return ClaimToV1alpha2(o), nil
		}
	case *resourcev1alpha2.ResourceClaimTemplate:
		switch to {
		case v1alpha2GV:
			return o, nil
		case v1GV:
			return TemplateToV1(o), nil
		}
	case *resourcev1.ResourceClaimTemplate:
		switch to {
		case v1GV:
			return o, nil
		case v1alpha2GV:
			return TemplateToV1alpha2(o), nil
		}
	}
	return nil, fmt.Errorf("no conversion of %T to %s", obj, to)
}

// viewMeta copies metadata and marks it as a view of an object stored in
// version from.
func viewMeta(m *metav1.ObjectMeta, from schema.GroupVersion) metav1.ObjectMeta {
	out := *m.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[resourcev1alpha2.StoredVersionAnnotation] = from.String()
	return out
}

// ClaimToV1 is the v1 view of a v1alpha2 claim.
func ClaimToV1(c *resourcev1alpha2.ResourceClaim) *resourcev1.ResourceClaim {
	out := &resourcev1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1GV.String(), Kind: "ResourceClaim"},
		ObjectMeta: viewMeta(&c.ObjectMeta, v1alpha2GV),
	}
	for _, r := range c.Status.ReservedFor {
		out.Status.ReservedFor = append(out.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			APIGroup: r.APIGroup, Resource: r.Resource, Name: r.Name, UID: r.UID})
	}
	a := c.Status.Allocation
	if a == nil {
		return out
	}
	out.Status.Allocation = &resourcev1.AllocationResult{NodeSelector: toKubeNodeSelector(a.AvailableOnNodes)}
	for _, h := range a.ResourceHandles {
		sd := h.StructuredData
		if sd == nil || sd.Partitionable == nil {
			continue
		}
		for _, inst := range sd.Partitionable.Instances {
			out.Status.Allocation.Devices.Results = append(out.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
				Request: SeedRequestName, Driver: h.DriverName, Pool: sd.NodeName, Device: SeedDeviceName(inst.ID)})
		}
	}
	return out
}

// ClaimToV1alpha2 is the v1alpha2 view of a v1 claim: one resource handle
// per driver, listing its devices as instances (names mapped back by
// SeedInstanceID).
func ClaimToV1alpha2(c *resourcev1.ResourceClaim) *resourcev1alpha2.ResourceClaim {
	out := &resourcev1alpha2.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2GV.String(), Kind: "ResourceClaim"},
		ObjectMeta: viewMeta(&c.ObjectMeta, v1GV),
	}
	for _, r := range c.Status.ReservedFor {
		out.Status.ReservedFor = append(out.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{
			APIGroup: r.APIGroup, Resource: r.Resource, Name: r.Name, UID: r.UID})
	}
	a := c.Status.Allocation
	if a == nil {
		return out
	}
	out.Status.Allocation = &resourcev1alpha2.AllocationResult{AvailableOnNodes: fromKubeNodeSelector(a.NodeSelector)}
	byDriver := map[string]int{}
	for _, r := range a.Devices.Results {
		i, ok := byDriver[r.Driver]
		if !ok {
			i = len(out.Status.Allocation.ResourceHandles)
			byDriver[r.Driver] = i
			out.Status.Allocation.ResourceHandles = append(out.Status.Allocation.ResourceHandles, resourcev1alpha2.ResourceHandle{
				DriverName: r.Driver, StructuredData: &resourcev1alpha2.StructuredResourceHandle{
					NodeName: r.Pool, Partitionable: &resourcev1alpha2.PartitionableAllocationResult{}}})
		}
		p := out.Status.Allocation.ResourceHandles[i].StructuredData.Partitionable
		p.Instances = append(p.Instances, resourcev1alpha2.AllocatedResourceInstance{ID: SeedInstanceID(r.Device)})
	}
	if len(byDriver) == 1 {
		out.Status.DriverName = out.Status.Allocation.ResourceHandles[0].DriverName
	}
	return out
}

// TemplateToV1 is the v1 view of a v1alpha2 claim template: metadata and
// the claims' metadata.
func TemplateToV1(t *resourcev1alpha2.ResourceClaimTemplate) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1GV.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: viewMeta(&t.ObjectMeta, v1alpha2GV),
		Spec:       resourcev1.ResourceClaimTemplateSpec{ObjectMeta: *t.Spec.ObjectMeta.DeepCopy()},
	}
}

// TemplateToV1alpha2 is the v1alpha2 view of a v1 claim template.
func TemplateToV1alpha2(t *resourcev1.ResourceClaimTemplate) *resourcev1alpha2.ResourceClaimTemplate {
	return &resourcev1alpha2.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2GV.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: viewMeta(&t.ObjectMeta, v1GV),
		Spec:       resourcev1alpha2.ResourceClaimTemplateSpec{ObjectMeta: *t.Spec.ObjectMeta.DeepCopy()},
	}
}

// The node selectors of both versions have the same JSON form.
func toKubeNodeSelector(s *corev1.NodeSelector) *kcorev1.NodeSelector {
	if s == nil {
		return nil
	}
	out := &kcorev1.NodeSelector{}
	recode(s, out)
	return out
}

func fromKubeNodeSelector(s *kcorev1.NodeSelector) *corev1.NodeSelector {
	if s == nil {
		return nil
	}
	out := &corev1.NodeSelector{}
	recode(s, out)
	return out
}

// recode copies between types of one JSON form; both sides are API types
// of this module or k8s.io/api, so neither step can fail.
func recode(from, to any) {
	data, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(data, to)
	}
	if err != nil {
		panic(fmt.Sprintf("recode %T as %T: %v", from, to, err))
	}
}
