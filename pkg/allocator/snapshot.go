package allocator

import (
	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
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

	// resource.k8s.io/v1: ResourceSlices, DeviceClasses, claims, claim
	// templates and DeviceTaintRules. The rules taint the devices of both
	// APIs (taintrules.go); the Simulation allocates seed claims only, so
	// it reads the rules and keeps the rest for callers that schedule v1
	// claims (internal/scheduler/simulate).
	V1Slices         []*resourcev1.ResourceSlice
	DeviceClasses    []*resourcev1.DeviceClass
	V1Claims         []*resourcev1.ResourceClaim
	V1ClaimTemplates []*resourcev1.ResourceClaimTemplate
	TaintRules       []*resourcev1.DeviceTaintRule
}
