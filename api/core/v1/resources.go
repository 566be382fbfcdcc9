package v1

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

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

// Bounds of amounts. allot counts every amount in an int64: cpu in
// millicores, everything else in its unit (bytes, devices). Validation
// refuses quantities beyond these bounds; the readers below clamp to them
// so that arithmetic on amounts stored before the bounds existed cannot
// wrap around.
var (
	MaxMilliQuantity = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	MaxQuantity      = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
)

// IsMilliResource reports whether allot counts the resource in
// millicores: cpu, and the quota names of cpu.
func IsMilliResource(name ResourceName) bool {
	switch name {
	case ResourceCPU, "requests.cpu", "limits.cpu":
		return true
	}
	return false
}

// Amount reads a quantity of the named resource as allot counts it
// (millicores for cpu, whole units rounded up otherwise), clamped to
// [0, math.MaxInt64]. Quantity.Value and MilliValue give 0 or a wrapped
// number for quantities such as 1e400; Amount gives math.MaxInt64.
func Amount(name ResourceName, q resource.Quantity) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	if IsMilliResource(name) {
		if q.Cmp(MaxMilliQuantity) >= 0 {
			return math.MaxInt64
		}
		return q.MilliValue()
	}
	if q.Cmp(MaxQuantity) >= 0 {
		return math.MaxInt64
	}
	return q.Value()
}

// AddAmounts adds two amounts, stopping at math.MaxInt64 instead of
// wrapping around. Amounts are never negative.
func AddAmounts(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
