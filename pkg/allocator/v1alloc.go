package allocator

// Allocation of resource.k8s.io/v1 ResourceClaims: the same pure engine as
// the seed's Allocate, for Kubernetes' v1 API, over one inventory of both
// APIs' devices (v1inventory.go) and one state, so that no device is ever
// handed out twice whichever API asks.
//
// The semantics are those of upstream's structured allocator
// (k8s.io/dynamic-resource-allocation/structured, the "stable" variant)
// with the features on by default in Kubernetes 1.37 that it implements:
// DRAPrioritizedList (firstAvailable), DRAAdminAccess,
// DRAPartitionableDevices (shared counters, per-device node selection) and
// DRADeviceTaints; DRAConsumableCapacity with DRAFractionalCapacityRange
// (shared devices, capacity requests, distinctAttribute; the incubating
// variant's rules, engine/capacity.go); and the partition locks of projected
// seed devices; DRADeviceBindingConditions (results carry the devices'
// binding conditions, bindsToNode limits the allocation to its node; the
// scheduler waits for the conditions). Not:
// compatibility groups (their slices leave a pool incomplete), list-typed
// attributes, derived attributes. DeviceTaintRules add their taints to
// the devices they select (NewInventoryTainted, taintrules.go). Where this engine differs from upstream, on
// purpose, the comments of AllocateV1 say so.
//
//	ResourceSlices + NodeResourceSlices ──NewInventory──▶ Inventory
//	Inventory + allocated v1 and v1alpha2 claims ──NewState──▶ State (WithAllocated, WithoutAllocated)
//	pod's v1 claims + DeviceClasses ──PrepareV1──▶ V1Request (Unresolvable)
//	V1Request + State + node ──AllocateV1(ctx)──▶ V1Result: Fits, Reasons, AllocationResults, Score

import (
	"context"
	"fmt"
	"slices"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
)

// V1Result is the outcome of allocating a pod's v1 claims on one node.
type V1Result struct {
	Node string
	// Fits is true when every claim of the pod can be used on the node.
	Fits bool
	// Reasons explain a rejection; empty when Fits.
	Reasons []Reason
	// Allocations is parallel to V1Request.Claims: the allocation to
	// store in the claim's status, or nil for a claim already allocated.
	Allocations []*resourcev1.AllocationResult
	// Score is 100 * free devices after / free devices before, counting
	// the devices that can be allocated on the node (usable pools,
	// available on the node, not in use, partitions and counters
	// permitting): how much of the node stays usable. 100 for a node
	// without free devices, and when the claims do not fit.
	Score int

	req *V1Request       // the request AllocateV1 answered (see For)
	sol *engine.Solution // CheckV1's: what Build builds the allocations from
}

// AllocateV1 decides whether the pod's pending v1 claims fit on the node,
// and with which devices. It does not change st; once the claims carry
// their allocations, st.WithAllocated gives the next state. Equal inputs
// give equal outputs. The only error is ErrDeadline (wrapped with the
// context's error, or after about two million search steps), returned
// when ctx ends before the answer is known: that is "unknown", never
// "does not fit".
//
// Candidates of a request on the node are the devices of usable pools
// available on the node (nodeName, nodeSelector, allNodes, per device or
// per slice) that match every selector of the request's DeviceClass and
// every selector of the request, whose NoSchedule and NoExecute taints
// the request tolerates, and which are free: not allocated, shared
// counters permitting, and for projected seed devices no partition
// conflict with a seed leaf in use or chosen (SeedLeavesConflict). A
// request with adminAccess may take allocated devices and takes nothing
// from others: its devices stay free, consume no counters and lock no
// partitions. No claim gets a device twice, and no two requests without
// admin access get the same device.
//
// ExactCount takes count distinct devices. All takes every device of the
// node that matches the class and the request, and fails when there is
// none, when more than 32 match, when one of them is in use (without
// admin access), not tolerated or without room in its counters, or when
// any pool that reaches the node is incomplete or invalid (upstream's
// rule: any pool, whatever its driver). firstAvailable tries its
// subrequests in order; with several such requests (all claims of the
// pod, in order) the combinations are taken lexicographically, and the
// first combination for which devices exist wins, even when a later one
// would pack better. matchAttribute requires the attribute, with one
// value, on every device of the requests it names (all when none; a
// request name covers whichever subrequest is chosen); distinctAttribute
// requires it with pairwise different values. Claims already allocated
// are not allocated again; their nodeSelector must match the node.
//
// Best fit: a solution costs, per device taken without admin access,
// first the fresh physical devices it breaks up (the first device taken
// from a shared counter set, or from a partitioned seed instance, of
// which nothing is in use), then the free devices of the node it makes
// unavailable (itself, plus those whose shared counters it exhausts or
// whose partitions it excludes). The search tries, device by device, the
// cheapest candidate first, then the one the fewest later requests of the
// pod could use, then pool and device order; after the first solution it
// spends v1ImproveSteps more steps on branch and bound for a cheaper one.
// So it keeps whole devices whole, packs partitions into devices already
// split, takes small partitions before big ones, and takes devices
// without partitions before breaking up one that has them. The search is
// complete (backtracking with forward checking, devices chosen as sets,
// interchangeable devices and untouched identical counter sets or seed
// instances tried once): if any allocation exists it finds one, unless
// the deadline comes first.
//
// Consumable capacity: a device with allowMultipleAllocations is
// allocated as shares, to any number of claims and to several requests
// of one claim (a request takes a device once), while the shares of
// each capacity sum to at most its value. A share consumes, per capacity
// of the device, the request's capacity.requests value rounded up by the
// capacity's requestPolicy (validRange: min, then min plus whole steps,
// exactly, also for fractional bounds; validValues: the smallest valid
// value at least the request), the policy's default when the request
// names no value, else the whole capacity; a request the device cannot
// serve (a capacity it lacks, a value above the policy or the capacity)
// does not make it a candidate, also for All. On a device without
// allowMultipleAllocations capacity.requests only selects (each value at
// most the capacity). The first share of a device consumes its shared
// counters, later ones nothing. An allocation of such a device without a
// shareID (made before the device allowed sharing) holds it whole. Best
// fit prefers devices already shared (a further share loses nothing).
// With admin access a share must fit what the state leaves but takes
// nothing.
//
// Results: one DeviceRequestAllocationResult per device, in request order
// and, within a request, in pool and device order, with the request name
// ("request/subrequest" for a subrequest), adminAccess when the request
// asked for it, and the request's tolerations as upstream copies them;
// a share of a shared device also carries its shareID (v1ShareID: a UUID
// derived from the claim, the request and the device, distinct among the
// device's shares; upstream draws a random one) and its consumedCapacity
// (every capacity of the device);
// Devices.Config lists each class's config once (FromClass, for the
// requests of that class), then the claim's config (FromClaim) that
// names an allocated request or subrequest or names none; a config that
// names every request of the claim gets an empty list (all), as upstream
// does. NodeSelector pins a claim with a node-local device to the node
// (matchFields metadata.name), merges the one-term selectors of
// network-attached devices, and is nil when every device is on all nodes.
//
// Differences from upstream, on purpose: upstream takes the first
// solution in its search order (and pools in map order), this takes the
// best fit above. Upstream's combination of subrequests depends on its
// device choices (it moves to a later subrequest of a later request
// before it tries other devices for an earlier one); this takes the
// lexicographically first feasible combination. A selector that fails to
// evaluate fails the claim on the node (a Reason, where upstream returns
// an error) whenever it fails on a device of the node that is not in use
// (for a subrequest: when no earlier subrequest of it fits), while
// upstream fails only if its first-fit walk, in its pool order, reaches
// that device. A
// device picked with admin access in one claim of the pod stays available
// to the pod's other claims (upstream blocks it for the claims after
// that one) and consumes no counters (upstream counts them). An All
// request whose devices break a constraint does not fit (upstream returns
// an error). distinctAttribute is implemented although upstream's stable
// allocator rejects it (it belongs to DRAConsumableCapacity). Counters
// are compared in int64 units of the finest of milli, units, kilo, ...
// that keeps every value of the counter below 2^50; values finer than
// that are rounded against the allocation (totals down, consumption up);
// consumable capacities likewise, per capacity of a device. Share IDs
// are derived, not random. A capacity request upstream cannot represent
// (a rounding past int64, or finer than a milli-unit on a fractional
// range) aborts upstream's allocation with an error; here the device
// cannot serve it. A device that no longer allows multiple allocations
// but still has shares is in use (upstream ignores the shares).
func AllocateV1(ctx context.Context, req *V1Request, st *State, node *corev1.Node) (*V1Result, error) {
	res, err := CheckV1(ctx, req, st, node)
	if err != nil {
		return nil, err
	}
	if res.sol != nil {
		res.Allocations, res.sol = buildV1(res.sol, req, res.Node), nil
	}
	return res, nil
}

// CheckV1 is AllocateV1 without writing the allocation results down: the
// decision, reasons and score are the same, Allocations is nil, and
// Build returns the allocations AllocateV1 would have. A scheduler
// judges every node and builds the allocations of the node it chooses.
func CheckV1(ctx context.Context, req *V1Request, st *State, node *corev1.Node) (*V1Result, error) {
	res := &V1Result{Score: 100, req: req}
	if node != nil {
		res.Node = node.Name
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocate on node %s: %w: %w", res.Node, ErrDeadline, err)
	}
	if len(req.reasons) > 0 {
		res.Reasons = slices.Clone(req.reasons)
		return res, nil
	}
	if rs := req.nodeReasons(node); len(rs) > 0 {
		res.Reasons = rs
		return res, nil
	}
	if !slices.Contains(req.Pending, true) {
		res.Fits = true
		res.Allocations = make([]*resourcev1.AllocationResult, len(req.claims))
		return res, nil
	}
	var en engine.Node
	sol, rs, score, err := req.Decide(ctx, &st.State, engineNode(node, &en))
	if err != nil {
		return nil, fmt.Errorf("allocate on node %s: %w", res.Node, err)
	}
	if sol == nil {
		res.Reasons = rs
		return res, nil
	}
	res.Fits, res.sol, res.Score = true, sol, score
	return res, nil
}

// Build returns the allocations of a fitting result, parallel to the
// request's claims (nil for claims already allocated); nil when the
// claims do not fit. Each call returns new objects.
func (r *V1Result) Build() []*resourcev1.AllocationResult {
	switch {
	case !r.Fits:
		return nil
	case r.sol != nil:
		return buildV1(r.sol, r.req, r.Node)
	case r.Allocations != nil:
		out := make([]*resourcev1.AllocationResult, len(r.Allocations))
		for i, a := range r.Allocations {
			out[i] = a.DeepCopy()
		}
		return out
	case r.req != nil:
		return make([]*resourcev1.AllocationResult, len(r.req.claims))
	}
	return nil
}
