package v1alpha2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +genclient
// +kubebuilder:object:root=true

// PodSchedulingContext is the scheduler's negotiation with driver
// controllers for one pod's control-plane claims (seed 003). Its name is the
// pod's name and the pod owns it.
type PodSchedulingContext struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodSchedulingContextSpec   `json:"spec"`
	Status            PodSchedulingContextStatus `json:"status,omitempty"`
}

// PodSchedulingContextSpec is written by the scheduler.
type PodSchedulingContextSpec struct {
	// SelectedNode is the node for which drivers should allocate.
	SelectedNode string `json:"selectedNode,omitempty"`
	// PotentialNodes are nodes the pod could run on, at most 128.
	PotentialNodes []string `json:"potentialNodes,omitempty" listType:"set"`
}

// PodSchedulingContextStatus is written by drivers.
type PodSchedulingContextStatus struct {
	ResourceClaims []ResourceClaimSchedulingStatus `json:"resourceClaims,omitempty" listType:"map" listMapKey:"name"`
}

// ResourceClaimSchedulingStatus is one driver's answer for one claim.
type ResourceClaimSchedulingStatus struct {
	// Name is the pod's spec.resourceClaims entry.
	Name string `json:"name,omitempty"`
	// UnsuitableNodes are potential nodes where the claim cannot be
	// allocated, at most 128.
	UnsuitableNodes []string `json:"unsuitableNodes,omitempty"`
}

// +kubebuilder:object:root=true

// PodSchedulingContextList is a list of scheduling contexts.
type PodSchedulingContextList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSchedulingContext `json:"items"`
}
