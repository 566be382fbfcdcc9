package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +kubebuilder:object:root=true

// ResourceClaimParameters is the structured form of a claim's parameters:
// per-driver requests with CEL selectors. A driver's controller generates it
// from a vendor kind (GeneratedFrom), or a user writes it directly.
type ResourceClaimParameters struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// GeneratedFrom links to the vendor object this was generated from.
	GeneratedFrom *ResourceClaimParametersReference `json:"generatedFrom,omitempty"`
	// VendorParameters are passed to the kubelet plugin in the allocation.
	VendorParameters *runtime.RawExtension `json:"vendorParameters,omitempty"`
	// Shareable claims may be used by several pods at once.
	Shareable bool `json:"shareable,omitempty"`
	// Requests are what the claim needs, per driver.
	Requests []ResourceRequest `json:"requests,omitempty"`
}

// ResourceRequest is what a claim needs from one driver.
type ResourceRequest struct {
	DriverName           string `json:"driverName"`
	ResourceRequestModel `json:",inline"`
}

// ResourceRequestModel has exactly one field set.
type ResourceRequestModel struct {
	Partitionable *PartitionableResourceRequests `json:"partitionable,omitempty"`
}

// PartitionableResourceRequests lists required instances.
type PartitionableResourceRequests struct {
	Required []PartitionableResourceRequest `json:"required"`
}

// PartitionableResourceRequest is one required instance.
type PartitionableResourceRequest struct {
	Name string `json:"name,omitempty"`
	// Selector is a CEL expression over the instance's attributes
	// (quantities, bools, ints, intslices, strings, stringslices, versions).
	Selector string `json:"selector"`
}

// +kubebuilder:object:root=true

// ResourceClaimParametersList is a list of claim parameters.
type ResourceClaimParametersList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceClaimParameters `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true

// ResourceClassParameters is the structured form of class parameters:
// filters every instance allocated through the class must pass.
// Cluster-scoped so only administrators and drivers write it.
type ResourceClassParameters struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// GeneratedFrom links to the vendor object this was generated from.
	GeneratedFrom *ResourceClassParametersReference `json:"generatedFrom,omitempty"`
	// VendorParameters are passed to the kubelet plugin in the allocation.
	VendorParameters *runtime.RawExtension `json:"vendorParameters,omitempty"`
	// Filters are per-driver selectors.
	Filters []ResourceFilter `json:"filters,omitempty"`
}

// ResourceFilter restricts the instances of one driver.
type ResourceFilter struct {
	DriverName          string `json:"driverName"`
	ResourceFilterModel `json:",inline"`
}

// ResourceFilterModel has exactly one field set.
type ResourceFilterModel struct {
	Partitionable *PartitionableResourceFilter `json:"partitionable,omitempty"`
}

// PartitionableResourceFilter is a selector every instance must pass.
type PartitionableResourceFilter struct {
	Selector string `json:"selector"`
}

// +kubebuilder:object:root=true

// ResourceClassParametersList is a list of class parameters.
type ResourceClassParametersList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceClassParameters `json:"items"`
}
