package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +genclient
// +kubebuilder:object:root=true

// ResourceQuota limits what a namespace may hold. allot enforces object
// counts, among them ResourceClaims in total
// ("count/resourceclaims.resource.k8s.io") and per class
// ("CLASS.resourceclass.resource.k8s.io/resourceclaims").
type ResourceQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceQuotaSpec   `json:"spec,omitempty"`
	Status            ResourceQuotaStatus `json:"status,omitempty"`
}

// ResourceQuotaSpec holds the hard limits.
type ResourceQuotaSpec struct {
	Hard ResourceList `json:"hard,omitempty"`
}

// ResourceQuotaStatus holds the limits in force and current usage.
type ResourceQuotaStatus struct {
	Hard ResourceList `json:"hard,omitempty"`
	Used ResourceList `json:"used,omitempty"`
}

// +kubebuilder:object:root=true

// ResourceQuotaList is a list of quotas.
type ResourceQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceQuota `json:"items"`
}
