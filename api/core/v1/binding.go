package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +kubebuilder:object:root=true

// Binding is the body of a POST to pods/NAME/binding. With only Target set it
// is Kubernetes' Binding: it sets the pod's spec.nodeName. allot extends it
// with ResourceClaims: the allocations and reservations of the pod's claims,
// written in the same etcd transaction as the node name, so a pod is never
// bound without its claims nor a claim allocated for a pod that was not bound.
type Binding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Target is the node, as {kind: Node, name: NODE}.
	Target ObjectReference `json:"target"`
	// ResourceClaims are allocated and/or reserved for the pod atomically
	// with the binding.
	ResourceClaims []BindingResourceClaim `json:"resourceClaims,omitempty"`
	// AllocationFences guard structured allocations: for every (node, driver)
	// that a structured allocation in ResourceClaims uses, the writer states
	// the allocation revision it has seen. The write fails with 409 Conflict
	// if another structured allocation on that (node, driver) was committed
	// after it, and otherwise bumps the revision.
	AllocationFences []AllocationFence `json:"allocationFences,omitempty"`
	// ExtendedResourceClaimStatus, when set, becomes the pod's
	// status.extendedResourceClaimStatus with the binding: the claim made
	// for the pod's extended resources that DRA serves on the target node.
	// That claim must be one of ResourceClaims, a resource.k8s.io/v1 claim
	// generated for the pod (its controller is the pod and it carries the
	// annotation resource.kubernetes.io/extended-resource-claim: "true"),
	// and each mapping must name a container of the pod, an extended
	// resource it requests, and a request of the claim.
	ExtendedResourceClaimStatus *PodExtendedResourceClaimStatus `json:"extendedResourceClaimStatus,omitempty"`
	// ClaimsOnly commits ResourceClaims (allocations and reservations,
	// under the same AllocationFences) without binding the pod: the pod,
	// which must not have a node yet, is left pending (only
	// ExtendedResourceClaimStatus is recorded), and the transaction fails
	// if it changed since it was read. The scheduler does this first for
	// devices with binding conditions, and binds the pod (a Binding that
	// only reserves) once the conditions are met.
	ClaimsOnly bool `json:"claimsOnly,omitempty"`
}

// ExtendedResourceClaimAnnotation marks a ResourceClaim the scheduler made
// for a pod's extended resources (Kubernetes' annotation of that name).
const ExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"

// BindingResourceClaim is one claim to allocate and/or reserve for the pod.
type BindingResourceClaim struct {
	// Name of the ResourceClaim, in the pod's namespace.
	Name string `json:"name"`
	// ResourceVersion, when set, must match the stored claim.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// DriverName becomes the claim's status.driverName when Allocation is set.
	DriverName string `json:"driverName,omitempty"`
	// Allocation is a resource.k8s.io/v1alpha2 AllocationResult to record.
	// Empty means the claim is already allocated and is only reserved.
	Allocation *runtime.RawExtension `json:"allocation,omitempty"`
}

// AllocationFence is the allocation revision a writer has seen for the
// structured allocations of one driver on one node.
type AllocationFence struct {
	NodeName   string `json:"nodeName"`
	DriverName string `json:"driverName"`
	// Revision is a resourceVersion: the writer's view of structured
	// allocations on (NodeName, DriverName) is complete up to it.
	Revision string `json:"revision"`
}
