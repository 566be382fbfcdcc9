// Package allocator allocates structured ("semantic") resource claims
// without asking the driver, for both resource.k8s.io versions: seed 002's
// v1alpha2 (KEP-4381: drivers publish partitionable resources in
// NodeResourceSlices, claims ask with CEL selectors over typed attribute
// maps) and Kubernetes' v1 (ResourceSlices, DeviceClasses, device
// requests). It holds the two front ends of one engine (package engine:
// one model of devices, one device-use state, one request definition,
// one search) and the cluster-wide indexes both use (Catalog, ClaimSet,
// Simulation).
//
// The v1 front end maps v1 objects onto the engine directly: pools of
// ResourceSlices (V1Pools), claims resolved against their classes
// (PrepareV1), results written from the engine's Solution (V1Result). The
// seed front end projects seed slices as devices of the same inventory
// (SeedDevices: one device per leaf, with the partition scheme
// constraint) and runs seed requests on the engine's search with its own
// layout and policy (seedsearch.go: fewest free candidates next, best
// fit first, the first solution), reading a node's NodeState from the
// one state (State.SeedNodeState), so no device is handed out twice
// whichever API asks. The scheduler and `allot simulate` both use it.
// The CEL values of both selector environments are in package celenv.
//
// The package is a pure core: it does no I/O, starts no goroutines and
// keeps no global state except bounded caches of compiled selectors. Equal
// inputs give equal outputs.
//
// A caller allocating a pod's claims on a node does, in order:
//
//  1. NewModel(node, slices) once per change of the node's slices. A Model
//     is immutable and shared by every pod and scheduling cycle.
//  2. NewNodeState(model, node, allocatedClaims) with the claims already
//     allocated on the node, or derive it from the previous state with
//     WithAllocated and WithoutAllocated. A caller that also has v1
//     claims (the scheduler) instead keeps one State (step 2 below)
//     and reads each node's state from it with
//     State.SeedNodeState(model, node, prev...), passing the states it
//     read before: one of them comes back while the node's instances in
//     use are the same, so caches keyed by a state's identity keep
//     answering.
//  3. Prepare(pod, claims) once per pod, with each claim's class,
//     parameters and vendor snapshots resolved (Simulation does this for
//     you). Pod-level problems come back in Request.Unresolvable.
//  4. Allocate(ctx, request, state) per node. It returns whether the claims
//     fit, why not (Reasons, each with a ReasonCode), the AllocationResult
//     to store in each pending claim's status, and a score. It fails only
//     with ErrDeadline when ctx ends first: that is "unknown", never
//     "does not fit".
//  5. After writing the allocations, WithAllocated gives the node's new
//     state.
//
// For v1 claims the steps are the same with the v1 names:
//
//  1. NewInventory (or NewInventoryModels, reusing the Models of
//     step 1) once per change of the slices of either version: the
//     engine's Inventory of both APIs' devices;
//  2. NewState with the allocated claims of both versions, then
//     WithChanges as claims change (State is the engine's one state,
//     changed by claims);
//  3. PrepareV1(pod, claims, class) once per pod (a Catalog's
//     DeviceClass is such a class function);
//  4. AllocateV1(ctx, request, state, node) per node, failing only with
//     ErrDeadline; or CheckV1, the same answer without the allocation
//     results, which V1Result.Build writes for the node a caller picks.
//
// Requests of one shape (pods from one template) have one
// V1Request.Signature; an answer kept per state and node is given to
// another request of that signature with V1Result.For (reasons,
// config and share IDs of its own claims).
//
// Devices with allowMultipleAllocations are allocated as shares of their
// consumable capacity (capacity.requests, rounded by the capacity's
// requestPolicy); State sums the shares of every claim, so steps 2 and
// 4 need nothing more. Each share's result carries a shareID derived
// from its claim: a caller that copies an allocation to another claim
// calls RederiveShareIDs on the copy.
//
// DeviceTaintRules taint the devices they select for both APIs: use
// NewModelTainted for step 1 and NewInventoryTainted (with those
// Models) for the inventory.
//
// Ownership: objects passed in are read, never modified; results are new
// objects owned by the caller (AllocateV1 reuses its scratch memory
// between calls, never its results). The devices of an inventory's pools
// share maps where their values are equal: read them, never write.
// Model, NodeState, Request, State and V1Request are safe for concurrent
// use. Simulation is not safe for concurrent mutation; see its
// documentation.
//
// Catalog and ClaimSet index a cluster's DRA objects of both versions
// once for every caller: classes (ResourceClasses and DeviceClasses),
// parameters and templates in the Catalog; claims in an immutable
// ClaimSet, derived from the previous one by claim events of either
// version (UpdateTouching).
//
// CompileSelector and CompileDeviceSelector check a selector of each API
// exactly as the allocator will run it, for admission. Reason, ReasonCode,
// the codes and ErrDeadline are the engine's, re-exported (reexport.go).
// README.md describes the model, the packages, the CEL variables, the
// search and its guarantees.
package allocator
