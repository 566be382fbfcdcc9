// Package dynamicresources is the DynamicResources plugin: it schedules
// pods that use ResourceClaims with structured parameters (seed 002,
// KEP-4381), allocating their claims with pkg/allocator on the node that
// is chosen, and commits the allocation with the pod's binding; and pods
// whose claims a driver's controller allocates (seed 003), negotiated
// through the pod's PodSchedulingContext.
//
// Contracts:
//
//   - Its objects (slices, claims, classes, parameters, vendor objects)
//     come only from framework.Snapshot.Extension(Name), an *Objects built
//     with NewObjects: by the scheduler from its informers, by `allot
//     explain` from one List, by `allot simulate` from files. The same code
//     judges pods in all three. It does no I/O.
//   - PreFilter resolves the pod's claims. A claim that does not exist yet,
//     a template entry whose claim is not recorded in the pod's status, and
//     a missing class or parameters object give Wait (not Unschedulable),
//     naming what is missing. Claims in use by another pod or being
//     deleted are Unschedulable on every node.
//   - Control-plane claims (class or status names a controller): an
//     Immediate claim not allocated yet, or one with deallocationRequested,
//     is a Wait. Filter rejects nodes outside an allocated claim's
//     availableOnNodes, outside a pending claim's class suitableNodes, and
//     those the pending claim's driver listed as unsuitable in the pod's
//     own context. After a successful cycle, Negotiate tells the scheduler
//     what the context's spec should be (potential nodes, and the node to
//     select: kept while feasible, else the best node when one claim is
//     pending or every pending claim's driver has answered) and why the
//     pod waits; the scheduler does the writes. PostFilter picks one
//     allocated WaitForFirstConsumer claim, unused or reserved only for
//     the pod and unavailable on some node, for deallocation
//     (RequestedDeallocation). Allocated control-plane claims are only
//     reserved by the binding.
//   - Filter runs allocator.Allocate on the node against the claims
//     allocated there (Objects) plus those reserved in memory by pods that
//     are assumed but whose binding the informers have not shown yet. A
//     search that runs out of time is an Error (retried), never
//     Unschedulable. Results are cached per cycle for Score and Reserve.
//   - Reserve keeps the chosen allocations in memory until the binding
//     fails (Unreserve) or the claims show up in Objects at or after the
//     binding's revision.
//   - ContributeBinding adds every claim of the pod to the Binding with
//     the resourceVersion it was decided on (the allocation as JSON when
//     the plugin allocated it) and one AllocationFence per (node, driver)
//     of the new structured allocations: the larger of Objects.Revision()
//     and the revision of this plugin's last successful binding there.
//   - EventsToRegister: a ResourceClaim event moves a parked pod only if
//     the claim is one of the pod's own (named in its spec or status, or
//     owned by it), or if the event frees instances (an allocation cleared,
//     an allocated claim deleted) and all the pod's claims are known.
//     ClaimsNamed tells the scheduler's queue gate whether a pending pod's
//     template claims are known: recorded in its status, or generated
//     for the entry (resourcev1alpha2.GeneratedFor) and in the claim
//     informer; until then it is not tried at all. PreFilter resolves an
//     unrecorded template entry to the claim generated for it
//     (Objects.GeneratedClaim), and the binding records it in the pod's
//     status.
//   - Device use is one state for both versions (allocator.State, built
//     once per Objects lineage and derived through claim events); a
//     node's base NodeState is its seed view (State.SeedNodeState), and
//     a cycle's in-memory allocations of pods in flight, of both
//     versions, go into one cycle state that both checks read.
//   - Objects.Next rebuilds the view after events, keeping each node's
//     compiled model while its slices are the same objects, and its base
//     NodeState while the node object and its instances in use are too.
//   - One path for both resource.k8s.io versions (parts.go): PreFilter
//     splits the pod's claims by the version they are stored in into
//     parts (claimPart: the v1alpha2 part, then the v1 part when the pod
//     has v1 claims, v1.go); Filter, Score, Reserve, Unreserve,
//     ContributeBinding, PostBind and answer reuse loop over the parts,
//     each doing what its API decides (how its claims are judged, how a
//     result is written into a claim and the binding, how a claim is
//     named), with no version branch in the shared steps. The v1 part is
//     judged with allocator.CheckV1 over one inventory (v1
//     ResourceSlices and the seed slices as v1 devices) and the claims of
//     both versions; Score averages the parts with claims. Reserve keeps
//     the chosen claims of both versions in one in-memory map (memClaim,
//     holding a claim in its version), which one overlay hands to later
//     cycles; claim events of both versions reach the Objects through one
//     entry (WithClaimChanges with ClaimChanges), for the scheduler's
//     informers and a simulation's bindings alike. DeviceClasses are in the Objects' catalog
//     with the seed classes (allocator.Catalog.DeviceClass), v1 claims in
//     its claim set with the seed claims (allocator.ClaimSet.V1Claim). A
//     v1 claim event touches, for answer reuse, the nodes whose local
//     pools (seed or v1) it holds or held devices of, and every node when
//     a pool is not local to one node. Answer reuse covers pods with v1
//     claims (reuse.go, R10-R12): the answer is one per part, under the
//     parts' signatures joined, and a reused v1 answer is taken
//     For the pod's request (allocator.V1Result.For) before its reasons
//     or allocations are read.
//   - DeviceTaintRules (Lists.TaintRules) taint the devices of both
//     versions they select: the nodes' models are compiled with them
//     (allocator.NewModelTainted) and so is the inventory
//     (allocator.NewInventoryTainted); Next keeps models only while
//     the rules are the same objects, and a rule's events move pods.
//   - Extended resources through DRA (extended.go, KEP-5004): a pod
//     asking for an extended resource that a DeviceClass maps
//     (allocator.Catalog.ExtendedResourceClass) is judged by this plugin
//     even without claims. On a node whose allocatable lacks the name,
//     Filter adds an in-memory v1 claim for the names DRA serves there
//     (one request container-I-request-J per container and name), built
//     once per set of names, to the pod's v1 claims; Reserve keeps it
//     under a placeholder name until it is created. ContributeBinding
//     sets the Binding's extendedResourceClaimStatus; the scheduler
//     creates the claim (framework.BindClaimMaker)
//     before posting the Binding and deletes it when the binding is
//     refused. Objects.ServesExtendedResource lets NodeResourcesFit skip
//     the names DRA serves.
//   - Devices with binding conditions (bindingconditions.go): BindingClaims
//     lists the pod's new allocations that hold such devices; the
//     scheduler then binds in two steps (the claims first with
//     Binding.ClaimsOnly, ClaimsCommitted, then a binding that only
//     reserves: ContributeBinding lists the claims without allocations,
//     resourceVersions or fences). BindingVerdict judges a waiting claim
//     (ready, or why to give up: deleted, deallocated, unreserved, a
//     failure condition, an untolerated taint), PastCommit whether a view
//     of it is recent enough to judge, ReleaseClaim is the status write
//     that undoes the first step.
//   - ClaimsReady tells whether a bound pod's claims are all allocated and
//     reserved for it, trusting the plugin's own binding of the pod once
//     it is committed (PostBind) and the caller's view otherwise. The
//     scheduler runs a claim cycle (plugins.NewClaimFramework, sharing
//     this instance) for bound pods whose claims are not ready.
package dynamicresources
