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
}

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
