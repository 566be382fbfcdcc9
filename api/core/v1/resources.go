package v1

import "k8s.io/apimachinery/pkg/api/resource"

// ResourceName is the name of a resource such as "cpu", "memory", "pods" or
// an extended resource "vendor.example.com/gpu".
type ResourceName string

// Well-known resource names.
const (
	ResourceCPU    ResourceName = "cpu"
	ResourceMemory ResourceName = "memory"
	ResourcePods   ResourceName = "pods"
)

// ResourceList maps resource names to quantities.
type ResourceList map[ResourceName]resource.Quantity

// ObjectReference points at another object.
type ObjectReference struct {
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	FieldPath       string `json:"fieldPath,omitempty"`
}

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)
