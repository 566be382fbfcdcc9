package allocator

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// SplitObjects sorts decoded manifest objects into the Snapshot a
// simulation starts from and the pods to place, in input order. Typed
// Nodes, NodeResourceSlices, ResourceClasses, ResourceClassParameters,
// ResourceClaimParameters, ResourceClaims and ResourceClaimTemplates, and
// resource.k8s.io/v1 ResourceSlices, DeviceClasses, ResourceClaims,
// ResourceClaimTemplates and DeviceTaintRules go to their Snapshot lists, *unstructured.Unstructured objects are vendor
// parameters, and every other object (Namespaces, CRDs, ...) is counted in
// ignored by kind (its Go type when the kind is not set). Objects are not
// copied.
func SplitObjects(objs []runtime.Object) (snap *Snapshot, pods []*corev1.Pod, ignored map[string]int) {
	snap = &Snapshot{}
	ignored = map[string]int{}
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Node:
			snap.Nodes = append(snap.Nodes, v)
		case *resourceapi.NodeResourceSlice:
			snap.Slices = append(snap.Slices, v)
		case *resourceapi.ResourceClass:
			snap.Classes = append(snap.Classes, v)
		case *resourceapi.ResourceClassParameters:
			snap.ClassParameters = append(snap.ClassParameters, v)
		case *resourceapi.ResourceClaimParameters:
			snap.ClaimParameters = append(snap.ClaimParameters, v)
		case *resourceapi.ResourceClaim:
			snap.Claims = append(snap.Claims, v)
		case *resourceapi.ResourceClaimTemplate:
			snap.ClaimTemplates = append(snap.ClaimTemplates, v)
		case *resourcev1.ResourceSlice:
			snap.V1Slices = append(snap.V1Slices, v)
		case *resourcev1.DeviceClass:
			snap.DeviceClasses = append(snap.DeviceClasses, v)
		case *resourcev1.ResourceClaim:
			snap.V1Claims = append(snap.V1Claims, v)
		case *resourcev1.ResourceClaimTemplate:
			snap.V1ClaimTemplates = append(snap.V1ClaimTemplates, v)
		case *resourcev1.DeviceTaintRule:
			snap.TaintRules = append(snap.TaintRules, v)
		case *corev1.Pod:
			pods = append(pods, v)
		case *unstructured.Unstructured:
			snap.VendorParameters = append(snap.VendorParameters, v)
		default:
			kind := o.GetObjectKind().GroupVersionKind().Kind
			if kind == "" {
				kind = fmt.Sprintf("%T", o)
			}
			ignored[kind]++
		}
	}
	return snap, pods, ignored
}
