package allocator

import "allot.dev/allot/pkg/allocator/engine"

// The engine's vocabulary that this package's answers carry, re-exported
// so that a caller of the front ends reads one package: reasons and
// their codes (engine/reasons.go documents each), and the deadline
// error.

type (
	// Reason is one explained rejection (engine.Reason).
	Reason = engine.Reason
	// ReasonCode names why a pod's claims cannot be allocated on a node
	// (engine.ReasonCode).
	ReasonCode = engine.ReasonCode
	// ReasonError carries pod-level reasons as an error
	// (engine.ReasonError).
	ReasonError = engine.ReasonError
)

// ErrDeadline is returned when the context ends, or a search exhausts its
// step budget, before the allocator could decide (engine.ErrDeadline). It
// never means "does not fit".
var ErrDeadline = engine.ErrDeadline

// Reason codes, engine.Reason*.
const (
	ReasonDriverNotOnNode         = engine.ReasonDriverNotOnNode
	ReasonNoMatch                 = engine.ReasonNoMatch
	ReasonClassFilter             = engine.ReasonClassFilter
	ReasonUnhealthy               = engine.ReasonUnhealthy
	ReasonInUse                   = engine.ReasonInUse
	ReasonNotEnough               = engine.ReasonNotEnough
	ReasonNoCombination           = engine.ReasonNoCombination
	ReasonClaimAllocatedElsewhere = engine.ReasonClaimAllocatedElsewhere
	ReasonClassNodeMismatch       = engine.ReasonClassNodeMismatch
	ReasonClaimInUse              = engine.ReasonClaimInUse
	ReasonClaimReservedForFull    = engine.ReasonClaimReservedForFull
	ReasonClaimDeleted            = engine.ReasonClaimDeleted
	ReasonInvalidSelector         = engine.ReasonInvalidSelector
	ReasonInvalidParameters       = engine.ReasonInvalidParameters
	ReasonClaimNotFound           = engine.ReasonClaimNotFound
	ReasonClassNotFound           = engine.ReasonClassNotFound
	ReasonParametersNotFound      = engine.ReasonParametersNotFound
	ReasonNotStructured           = engine.ReasonNotStructured
	ReasonNodeNotFound            = engine.ReasonNodeNotFound
	ReasonNodeUnschedulable       = engine.ReasonNodeUnschedulable
	ReasonNodeSelectorMismatch    = engine.ReasonNodeSelectorMismatch
	ReasonConstraint              = engine.ReasonConstraint
	ReasonCounters                = engine.ReasonCounters
	ReasonPoolIncomplete          = engine.ReasonPoolIncomplete
	ReasonTainted                 = engine.ReasonTainted
	ReasonSelectorError           = engine.ReasonSelectorError
	ReasonTooManyDevices          = engine.ReasonTooManyDevices
	ReasonAdminAccessDenied       = engine.ReasonAdminAccessDenied
	ReasonCapacity                = engine.ReasonCapacity
)

// CompileDeviceSelector checks a resource.k8s.io/v1 CEL selector as the
// engine will run it, for admission (engine.CompileDeviceSelector). The
// error wraps ErrInvalidSelector.
func CompileDeviceSelector(expr string) error { return engine.CompileDeviceSelector(expr) }
