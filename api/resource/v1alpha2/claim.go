package v1alpha2

import (
	corev1 "allot.dev/allot/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Limits from the seeds, enforced by validation.
const (
	ResourceClaimReservedForMaxSize        = 32
	AllocationResultResourceHandlesMaxSize = 32
	ResourceHandleDataMaxSize              = 16 * 1024
	PodSchedulingNodeListMaxSize           = 128
)

// List limits allot adds where the seeds leave a list unbounded, chosen
// like Kubernetes' resource.k8s.io/v1 limits (32 requests, selectors and
// configurations per claim; 32 attributes and capacities per device). The
// request body limit bounds everything else.
const (
	// ClaimParametersRequestsMaxSize bounds requests of
	// ResourceClaimParameters, and RequiredMaxSize the required instances
	// of one request.
	ClaimParametersRequestsMaxSize = 32
	RequiredMaxSize                = 32
	// ClassParametersFiltersMaxSize bounds filters of
	// ResourceClassParameters.
	ClassParametersFiltersMaxSize = 32
	// AllocationResultInstancesMaxSize bounds the instances of one
	// structured handle: every required instance of every request.
	AllocationResultInstancesMaxSize = ClaimParametersRequestsMaxSize * RequiredMaxSize
	// PodSchedulingClaimsMaxSize bounds status.resourceClaims of a
	// PodSchedulingContext: one per claim of the pod.
	PodSchedulingClaimsMaxSize = 32
	// Slice lists: attributes of one instance or group, common attribute
	// groups, references to them, partition groups of one instance, and
	// elements of intSlice and stringSlice values.
	AttributesMaxSize           = 64
	CommonAttributesMaxSize     = 128
	CommonAttributesRefsMaxSize = 32
	PartitionsMaxSize           = 128
	AttributeSliceMaxSize       = 64
)

// DeleteProtectionFinalizer is set on a claim whose structured allocation
// the scheduler wrote; the claim controller clears the allocation and the
// finalizer together once the claim is unused (seed 002).
const DeleteProtectionFinalizer = "semantic.dra.k8s.io/delete-protection"

// PodClaimNameAnnotation is set on every claim the claim controller
// generates from a pod's template: its value is the name of the pod's
// spec.resourceClaims entry. With the pod as controlling owner it
// identifies the claim as that entry's, before and after the pod's status
// records its name.
const PodClaimNameAnnotation = "resource.allot.dev/pod-claim-name"

// StoredVersionAnnotation marks a ResourceClaim or ResourceClaimTemplate
// read through another resource.k8s.io version than the one it was
// written in: its value is the apiVersion the object is stored as (for
// example "resource.k8s.io/v1" on a v1alpha2 view of a v1 claim). The API
// server sets it on such views and never stores it. A view carries the
// object's metadata, status as far as the version can express it, and an
// empty spec: components that act on a version's spec skip views.
const StoredVersionAnnotation = "resource.allot.dev/stored-version"

// IsView reports whether the object is a view of an object stored in
// another version (see StoredVersionAnnotation).
func IsView(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[StoredVersionAnnotation]
	return ok
}

// GeneratedFor returns the pod (by UID) and the spec.resourceClaims entry
// the claim was generated for, from its controlling owner reference and
// PodClaimNameAnnotation; ok is false for other claims, and for a claim
// whose owner reference has no UID (a simulated pod's, which has none): it
// names no pod, and claims of several such pods would pass for each
// other's.
func GeneratedFor(c *ResourceClaim) (podUID types.UID, entry string, ok bool) {
	return GeneratedForMeta(&c.ObjectMeta)
}

// GeneratedForMeta is GeneratedFor on a claim's metadata, whatever the
// claim's version.
func GeneratedForMeta(m metav1.Object) (podUID types.UID, entry string, ok bool) {
	entry, ok = m.GetAnnotations()[PodClaimNameAnnotation]
	ref := metav1.GetControllerOfNoCopy(m)
	if !ok || ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.UID == "" {
		return "", "", false
	}
	return ref.UID, entry, true
}

// +genclient
// +kubebuilder:object:root=true

// ResourceClaim asks for resources. Its spec is immutable after creation.
type ResourceClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceClaimSpec   `json:"spec"`
	Status            ResourceClaimStatus `json:"status,omitempty"`
}

// ResourceClaimSpec says what is asked for.
type ResourceClaimSpec struct {
	ResourceClassName string                            `json:"resourceClassName"`
	ParametersRef     *ResourceClaimParametersReference `json:"parametersRef,omitempty"`
	// AllocationMode defaults to WaitForFirstConsumer.
	AllocationMode AllocationMode `json:"allocationMode,omitempty"`
}

// AllocationMode says when a claim is allocated.
type AllocationMode string

// Allocation modes.
const (
	AllocationModeWaitForFirstConsumer AllocationMode = "WaitForFirstConsumer"
	AllocationModeImmediate            AllocationMode = "Immediate"
)

// ResourceClaimParametersReference points at claim parameters in the claim's
// namespace: a ResourceClaimParameters object or a vendor kind.
type ResourceClaimParametersReference struct {
	APIGroup string `json:"apiGroup,omitempty"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// ResourceClaimStatus is the claim's allocation and reservations.
type ResourceClaimStatus struct {
	DriverName string `json:"driverName,omitempty"`
	// ControllerName is the driver controller that allocated the claim;
	// empty for structured allocations (seed 003).
	ControllerName string            `json:"controllerName,omitempty"`
	Allocation     *AllocationResult `json:"allocation,omitempty"`
	// ReservedFor lists the consumers that may use the claim, at most 32.
	ReservedFor []ResourceClaimConsumerReference `json:"reservedFor,omitempty" listType:"map" listMapKey:"uid"`
	// DeallocationRequested asks the driver controller to deallocate.
	DeallocationRequested bool `json:"deallocationRequested,omitempty"`
}

// AllocationResult is where and how a claim was allocated.
type AllocationResult struct {
	// ResourceHandles hold per-driver data for the kubelet plugins, at most 32.
	ResourceHandles []ResourceHandle `json:"resourceHandles,omitempty"`
	// AvailableOnNodes are the nodes where the allocated resources are usable.
	AvailableOnNodes *corev1.NodeSelector `json:"availableOnNodes,omitempty"`
	// Shareable claims may be reserved for several consumers at once.
	Shareable bool `json:"shareable,omitempty"`
}

// ResourceHandle carries one driver's allocation to its kubelet plugin.
type ResourceHandle struct {
	DriverName string `json:"driverName,omitempty"`
	// Data is opaque to allot, at most 16 KiB.
	Data string `json:"data,omitempty"`
	// StructuredData is set instead of Data by the scheduler for structured
	// allocations.
	StructuredData *StructuredResourceHandle `json:"structuredData,omitempty"`
}

// StructuredResourceHandle is seed 002's SemanticResourceHandle, named as in
// Kubernetes 1.30: what the scheduler allocated and the parameters it used.
type StructuredResourceHandle struct {
	VendorClassParameters *runtime.RawExtension `json:"vendorClassParameters,omitempty"`
	VendorClaimParameters *runtime.RawExtension `json:"vendorClaimParameters,omitempty"`
	// NodeName is the node that provides the allocated instances.
	NodeName string `json:"nodeName,omitempty"`
	// Partitionable is the allocation in the partitionable model.
	Partitionable *PartitionableAllocationResult `json:"partitionable,omitempty"`
}

// PartitionableAllocationResult lists the allocated instances.
type PartitionableAllocationResult struct {
	Instances []AllocatedResourceInstance `json:"instances"`
}

// AllocatedResourceInstance is one allocated instance: the names from the
// slice's root instance down, instance and partition-group names alternating,
// joined by "/".
type AllocatedResourceInstance struct {
	ID string `json:"id"`
}

// ResourceClaimConsumerReference names a consumer (normally a pod).
type ResourceClaimConsumerReference struct {
	APIGroup string    `json:"apiGroup,omitempty"`
	Resource string    `json:"resource"`
	Name     string    `json:"name"`
	UID      types.UID `json:"uid"`
}

// +kubebuilder:object:root=true

// ResourceClaimList is a list of claims.
type ResourceClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceClaim `json:"items"`
}

// +genclient
// +kubebuilder:object:root=true

// ResourceClaimTemplate produces one ResourceClaim per pod that references
// it. Its spec is immutable.
type ResourceClaimTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceClaimTemplateSpec `json:"spec"`
}

// ResourceClaimTemplateSpec is the metadata and spec copied into each
// claim. Its metadata may carry only labels and annotations (seed 000);
// any other field is refused at validation.
type ResourceClaimTemplateSpec struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceClaimSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// ResourceClaimTemplateList is a list of templates.
type ResourceClaimTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceClaimTemplate `json:"items"`
}
