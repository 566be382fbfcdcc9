// Package allocator allocates structured ("semantic") resource claims, as
// seed 002 (KEP-4381) describes, without asking the driver: drivers publish
// partitionable resources in NodeResourceSlices, claims ask with CEL
// selectors, and the allocator picks the instances. The scheduler and
// `allot simulate` both use it.
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
//     WithAllocated and WithoutAllocated.
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
// Ownership: objects passed in are read, never modified; results are new
// objects owned by the caller. Model, NodeState and Request are safe for
// concurrent use. Simulation is not safe for concurrent mutation; see its
// documentation.
//
// CompileSelector checks a selector exactly as Allocate will run it, for
// admission. README.md describes the model, the CEL variables, the search
// and its guarantees.
package allocator
