package engine

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDeadline is returned when the context ends (or a search exhausts its
// step budget) before the allocator could decide. It never means "does not
// fit": the node was not judged.
var ErrDeadline = errors.New("allocation search ran out of time")

// ReasonCode names why a pod's claims cannot be allocated on a node. Every
// "no" the allocator gives carries one, so it can be explained and counted.
type ReasonCode string

// Rejections decided per node by the allocator.
const (
	// ReasonDriverNotOnNode: the node publishes no resources of a driver
	// that a request needs.
	ReasonDriverNotOnNode ReasonCode = "DriverNotOnNode"
	// ReasonNoMatch: the request's selector rejects every instance of the
	// driver on the node; Clause is the conjunct that rejected the most.
	ReasonNoMatch ReasonCode = "NoMatchingInstance"
	// ReasonClassFilter: the class's filter rejects every instance that the
	// request's selector would accept; Clause is the filter clause.
	ReasonClassFilter ReasonCode = "RejectedByClassFilter"
	// ReasonUnhealthy: instances match, but all are unhealthy or malformed.
	ReasonUnhealthy ReasonCode = "MatchingInstancesUnhealthy"
	// ReasonInUse: instances match, but all are allocated or locked by a
	// different partitioning of their device.
	ReasonInUse ReasonCode = "MatchingInstancesInUse"
	// ReasonNotEnough: the requests need more instances than can be
	// allocated at the same time among those matching them.
	ReasonNotEnough ReasonCode = "NotEnoughInstances"
	// ReasonNoCombination: each request has candidates, but no combination
	// satisfies all requests at once given the partition rules.
	ReasonNoCombination ReasonCode = "NoCombination"
	// ReasonClaimAllocatedElsewhere: the claim is already allocated, and
	// its availableOnNodes does not include this node.
	ReasonClaimAllocatedElsewhere ReasonCode = "ClaimAllocatedElsewhere"
	// ReasonClassNodeMismatch: the class's suitableNodes excludes the node.
	ReasonClassNodeMismatch ReasonCode = "ClassSuitableNodesMismatch"
)

// Rejections that hold on every node: the pod cannot run anywhere until
// its claims change.
const (
	// ReasonClaimInUse: a claim that is not shareable is reserved for
	// another pod.
	ReasonClaimInUse ReasonCode = "ClaimInUse"
	// ReasonClaimReservedForFull: a shareable claim has the maximum number
	// of consumers.
	ReasonClaimReservedForFull ReasonCode = "ClaimReservedForFull"
	// ReasonClaimDeleted: the claim is being deleted.
	ReasonClaimDeleted ReasonCode = "ClaimBeingDeleted"
	// ReasonInvalidSelector: a selector or class filter does not compile.
	ReasonInvalidSelector ReasonCode = "InvalidSelector"
	// ReasonInvalidParameters: the parameters cannot be used (a request
	// without a known model, too many distinct requests).
	ReasonInvalidParameters ReasonCode = "InvalidParameters"
	// ReasonClaimNotFound, ReasonClassNotFound, ReasonParametersNotFound:
	// an object the claim refers to does not exist (yet).
	ReasonClaimNotFound      ReasonCode = "ClaimNotFound"
	ReasonClassNotFound      ReasonCode = "ClassNotFound"
	ReasonParametersNotFound ReasonCode = "ParametersNotFound"
	// ReasonNotStructured: the claim's class names a control-plane
	// controller; this allocator handles structured parameters only.
	ReasonNotStructured ReasonCode = "NotStructuredParameters"
)

// Rejections of the simulation's node-level filter.
const (
	ReasonNodeNotFound         ReasonCode = "NodeNotFound"
	ReasonNodeUnschedulable    ReasonCode = "NodeUnschedulable"
	ReasonNodeSelectorMismatch ReasonCode = "NodeSelectorMismatch"
)

// Reason is one explained rejection.
type Reason struct {
	Code ReasonCode
	// Claim is "namespace/name" of the claim concerned, if any.
	Claim string
	// Driver is the driver concerned, if any.
	Driver string
	// Requests names the requests concerned (their name in the claim
	// parameters, or "requests[i].required[j]" when unnamed).
	Requests []string
	// Clause is the selector or filter clause that rejected the instances,
	// verbatim, when one is to blame.
	Clause string
	// Message is the whole explanation, for people.
	Message string

	detail string // Message without the claim, requests and driver
}

func (r Reason) String() string { return r.Message }

// Detail is the message without the claim, requests and driver: a front
// end that rebinds a reason to another claim formats it again from its
// parts (NewReason).
func (r Reason) Detail() string { return r.detail }

// NewReason formats a reason's message from its parts and detail.
func NewReason(code ReasonCode, claim, driver string, requests []string, clause, detail string) Reason {
	var b strings.Builder
	if claim != "" {
		fmt.Fprintf(&b, "claim %s", claim)
	}
	if len(requests) > 0 {
		noun := "request"
		if len(requests) > 1 {
			noun = "requests"
		}
		fmt.Fprintf(&b, " %s %s", noun, abbreviate(requests))
	}
	if driver != "" {
		fmt.Fprintf(&b, " (driver %s)", driver)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(detail)
	return Reason{Code: code, Claim: claim, Driver: driver, Requests: requests, Clause: clause,
		Message: strings.TrimSpace(b.String()), detail: detail}
}

// abbreviate lists up to four names, then how many more there are.
func abbreviate(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}

// ReasonError carries pod-level reasons as an error.
type ReasonError struct{ Reasons []Reason }

func (e *ReasonError) Error() string {
	msgs := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		msgs[i] = r.Message
	}
	return strings.Join(msgs, "; ")
}

// Rejections of v1 claims, in addition to the seed's codes (ReasonNoMatch,
// ReasonClassFilter, ReasonInUse, ReasonNotEnough, ReasonNoCombination,
// ReasonClaimAllocatedElsewhere, ReasonClaimDeleted,
// ReasonClaimReservedForFull, ReasonInvalidSelector,
// ReasonInvalidParameters, ReasonClassNotFound), which keep their
// meaning with "device" for "instance".
const (
	// ReasonConstraint: each request has devices, but no choice satisfies
	// a matchAttribute or distinctAttribute constraint; Clause quotes it.
	ReasonConstraint ReasonCode = "ConstraintNotSatisfied"
	// ReasonCounters: devices match, but the shared counters of their
	// pools do not leave room for them; Clause names the counter.
	ReasonCounters ReasonCode = "SharedCountersExhausted"
	// ReasonPoolIncomplete: a request for all devices, and a pool that
	// reaches the node is incomplete or invalid; Clause is driver/pool.
	ReasonPoolIncomplete ReasonCode = "PoolIncomplete"
	// ReasonTainted: the matching devices have NoSchedule or NoExecute
	// taints the request does not tolerate; Clause is the first taint.
	ReasonTainted ReasonCode = "DeviceTaintNotTolerated"
	// ReasonSelectorError: a selector failed to evaluate on a device of
	// the node (as upstream, this fails the claim, not just the device);
	// Clause is the selector.
	ReasonSelectorError ReasonCode = "SelectorEvaluationError"
	// ReasonTooManyDevices: a claim would hold more than 32 devices.
	ReasonTooManyDevices ReasonCode = "TooManyDevices"
	// ReasonAdminAccessDenied: a request asks for adminAccess in a
	// namespace without the label resource.kubernetes.io/admin-access=true.
	ReasonAdminAccessDenied ReasonCode = "AdminAccessNotAllowed"
)

// ReasonCapacity: devices match, but none that could take the request
// has enough of a consumable capacity left (shares of a device with
// allowMultipleAllocations); Clause names the capacity.
const ReasonCapacity ReasonCode = "CapacityExhausted"
