package allocator

import (
	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Snapshot is the cluster state a simulation starts from. The simulation
// reads it and never modifies it; objects it changes are copied first.
type Snapshot struct {
	Nodes           []*corev1.Node
	Slices          []*resourceapi.NodeResourceSlice
	Classes         []*resourceapi.ResourceClass
	ClassParameters []*resourceapi.ResourceClassParameters
	ClaimParameters []*resourceapi.ResourceClaimParameters
	Claims          []*resourceapi.ResourceClaim
	ClaimTemplates  []*resourceapi.ResourceClaimTemplate
	// VendorParameters are the vendor objects that claims and classes refer
	// to (such as a CardParameters); they are snapshotted into allocations.
	VendorParameters []*unstructured.Unstructured
}
