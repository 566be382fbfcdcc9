package controller

import (
	"context"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// Driver is the vendor logic of a control-plane driver controller. The
// controller calls it concurrently for different claims, never
// concurrently for the same claim (by UID) in Allocate and Deallocate.
// Every call carries a context with Config.DriverTimeout as deadline.
// Objects passed in are copies the driver may keep but should not modify,
// except ClaimAllocation.UnsuitableNodes.
type Driver interface {
	// GetClassParameters returns the driver's view of the class's
	// parametersRef (nil when the class has none and nothing is needed).
	// An error is recorded as a ParametersUnavailable event on the claim
	// being handled and retried with backoff.
	GetClassParameters(ctx context.Context, class *resourcev1alpha2.ResourceClass) (any, error)

	// GetClaimParameters returns the driver's view of the claim's
	// parametersRef; classParameters is what GetClassParameters returned.
	// Errors are handled as for GetClassParameters.
	GetClaimParameters(ctx context.Context, claim *resourcev1alpha2.ResourceClaim,
		class *resourcev1alpha2.ResourceClass, classParameters any) (any, error)

	// Allocate allocates the claim and returns the allocation to store in
	// its status. selectedNode is the node the scheduler chose for a
	// WaitForFirstConsumer claim, "" for an Immediate claim.
	//
	// Allocate must be idempotent per claim UID: the controller may call
	// it again for a claim it already allocated when it could not record
	// the result (a failed status write, a restart between Allocate and
	// the write). It must then return the same allocation, or release the
	// earlier one and allocate anew (for example when the earlier one is
	// not usable on a new selectedNode), but never hold both. Keep
	// vendor-side bookkeeping keyed by claim UID, or derive it from the
	// claims' allocations in the API.
	//
	// A handle without DriverName gets Config.DriverName; an allocation
	// without handles gets one for Config.DriverName with empty data.
	Allocate(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, claimParameters any,
		class *resourcev1alpha2.ResourceClass, classParameters any, selectedNode string) (*resourcev1alpha2.AllocationResult, error)

	// Deallocate releases what Allocate reserved for the claim. It is
	// called when the claim is being deleted or deallocation was
	// requested, once nobody reserves the claim, also for claims whose
	// allocation was never recorded in the API (the controller stopped
	// between Allocate and the status write): status.allocation may be
	// nil. A claim unknown to the vendor is a success.
	Deallocate(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) error

	// UnsuitableNodes sets UnsuitableNodes of each claim: the nodes of
	// potentialNodes where that claim cannot be allocated, considering all
	// the pod's claims of this driver together. claims are the pod's
	// pending (unallocated, WaitForFirstConsumer) claims of this driver.
	UnsuitableNodes(ctx context.Context, pod *corev1.Pod, claims []*ClaimAllocation, potentialNodes []string) error
}

// ClaimAllocation is one of a pod's pending claims as UnsuitableNodes
// sees it.
type ClaimAllocation struct {
	// PodClaimName is the name of the pod's spec.resourceClaims entry,
	// the name of its entry in the PodSchedulingContext's status.
	PodClaimName    string
	Claim           *resourcev1alpha2.ResourceClaim
	Class           *resourcev1alpha2.ResourceClass
	ClassParameters any
	ClaimParameters any

	// UnsuitableNodes is the driver's answer: nodes of potentialNodes
	// where this claim cannot be allocated.
	UnsuitableNodes []string
}

// Event reasons of the Warning events the controller records on claims.
const (
	// ReasonAllocationFailed: Driver.Allocate failed, or its result could
	// not be stored.
	ReasonAllocationFailed = "AllocationFailed"
	// ReasonDeallocationFailed: Driver.Deallocate failed.
	ReasonDeallocationFailed = "DeallocationFailed"
	// ReasonParametersUnavailable: GetClassParameters or
	// GetClaimParameters failed.
	ReasonParametersUnavailable = "ParametersUnavailable"
)

// FinalizerSuffix follows the controller name in the finalizer the
// controller puts on claims it allocates: CONTROLLER/deletion-protection.
const FinalizerSuffix = "/deletion-protection"

// Finalizer is the finalizer a controller named controllerName puts on
// the claims it allocates before it calls Allocate, and removes after
// Deallocate: while it is set the vendor may hold resources for the
// claim.
func Finalizer(controllerName string) string { return controllerName + FinalizerSuffix }
