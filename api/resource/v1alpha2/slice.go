package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true

// NodeResourceSlice publishes what one driver offers on one node, in a
// structured model the scheduler allocates from without asking the driver.
// The node agent writes it; its Node owns it.
type NodeResourceSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeResourceSliceSpec `json:"spec"`
}

// NodeResourceSliceSpec names the node and driver and holds exactly one model.
type NodeResourceSliceSpec struct {
	// NodeName is the node that has the resources (field selector
	// spec.nodeName).
	NodeName string `json:"nodeName"`
	// DriverName is the driver that manages them (field selector
	// spec.driverName).
	DriverName        string `json:"driverName"`
	NodeResourceModel `json:",inline"`
}

// NodeResourceModel has exactly one field set.
type NodeResourceModel struct {
	Partitionable *PartitionableResources `json:"partitionable,omitempty"`
}

// PartitionableResources is seed 002's partitionable model: attribute groups
// referenced by name, and a forest of instances that may be partitioned.
type PartitionableResources struct {
	CommonAttributes  []AttributeGroup   `json:"commonAttributes,omitempty"`
	ResourceInstances []ResourceInstance `json:"resourceInstances,omitempty"`
}

// AttributeGroup is a named set of attributes that instances and partition
// groups reference through commonAttributesRefs.
type AttributeGroup struct {
	Name       string      `json:"name"`
	Attributes []Attribute `json:"attributes,omitempty"`
}

// Attribute is a named value of exactly one type.
type Attribute struct {
	Name           string `json:"name"`
	AttributeValue `json:",inline"`
}

// AttributeValue has exactly one field set.
type AttributeValue struct {
	Quantity    *resource.Quantity `json:"quantity,omitempty"`
	Bool        *bool              `json:"bool,omitempty"`
	Int         *int64             `json:"int,omitempty"`
	IntSlice    *[]int64           `json:"intSlice,omitempty"`
	String      *string            `json:"string,omitempty"`
	StringSlice *[]string          `json:"stringSlice,omitempty"`
	// Version is a semantic version, parsed tolerantly: surrounding spaces
	// and a "v" prefix are dropped, a missing patch is 0, leading zeros are
	// removed.
	Version *string `json:"version,omitempty"`
}

// InstanceHealth is the driver-reported health of an instance.
type InstanceHealth string

// Instance health values. An empty health means Healthy.
const (
	InstanceHealthy   InstanceHealth = "Healthy"
	InstanceUnhealthy InstanceHealth = "Unhealthy"
)

// ResourceInstance is a device or a part of one. Only instances without
// partitions can be allocated.
type ResourceInstance struct {
	Name                 string      `json:"name"`
	CommonAttributesRefs []string    `json:"commonAttributesRefs,omitempty"`
	Attributes           []Attribute `json:"attributes,omitempty"`
	// Partitions are alternative ways to split this instance; using an
	// instance inside one group locks the parent to that group.
	Partitions []ResourceInstanceGroup `json:"partitions,omitempty"`
	// Health as reported by the driver; unhealthy instances are not
	// allocated.
	Health InstanceHealth `json:"health,omitempty"`
}

// ResourceInstanceGroup is one partitioning scheme of an instance.
type ResourceInstanceGroup struct {
	Name                 string             `json:"name"`
	CommonAttributesRefs []string           `json:"commonAttributesRefs,omitempty"`
	ResourceInstances    []ResourceInstance `json:"resourceInstances,omitempty"`
}

// +kubebuilder:object:root=true

// NodeResourceSliceList is a list of slices.
type NodeResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeResourceSlice `json:"items"`
}
