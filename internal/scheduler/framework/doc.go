// Package framework is the scheduling pipeline and the contract between it
// and its plugins. It does no I/O and keeps no state between calls: the
// scheduler, `allot explain` and simulations run the same Framework over
// a Snapshot.
//
// A plugin is a small value with a Name and one method set per extension
// point it joins; New sorts plugins into the points they implement:
//
//	PreFilter    once per pod: check the pod, prepare CycleState; Skip skips
//	             the plugin's own Filter; a rejection or Wait stops the cycle
//	Filter       per node, in parallel: does the pod fit this node?
//	PostFilter   when no node fits: try to make room (scheduler only)
//	Score        per feasible node, then NormalizeScore, times the weight
//	Reserve      set aside what the pod will use on the chosen node;
//	             Unreserve undoes it if a later step fails
//	BindContributor  fill the one Binding (claim allocations, allocation
//	             fences) posted atomically with the node
//	BindClaimMaker  a claim the caller creates before posting the Binding
//	             (the claim of a pod's extended resources served by DRA)
//	EnqueueExtensions  the cluster events, with per-pod hints, that may
//	             make a pod this plugin rejected schedulable
//
// Every answer is a *Status with a Code (Success, Unschedulable,
// UnschedulableAndUnresolvable, Wait, Error, Skip), reasons that are
// counted across nodes ("Insufficient cpu"), and an optional node-specific
// detail; never a bool. Wait means "waiting for something outside the
// scheduler" and parks the pod without backoff until a registered event.
//
// A caller scheduling one pod does, in order:
//
//  1. NewCycleState() for the attempt, and a Snapshot (NewSnapshot from
//     objects, or the scheduler cache's).
//  2. Schedule(ctx, state, snap, pod): PreFilter, Filter, Score and the
//     choice of node, recorded in a Diagnosis. On no fit, RunPostFilter.
//  3. RunReserve(ctx, state, pod, node); on failure it has already called
//     every Unreserve.
//  4. RunBindContributors(ctx, state, pod, node, binding); create the
//     claims of BindClaimMakers (ClaimToCreate, then ClaimCreated), then
//     post the binding; on any failure RunUnreserve (and delete those
//     claims if the binding was refused).
//
// Diagnose runs step 2 without side effects, asking every filter about
// every node, for explanations.
//
// Ownership: pods, nodes and NodeInfos passed to plugins are shared and
// must not be modified; a Snapshot and its NodeInfos are immutable (derive
// new ones with WithPod, WithoutPod, WithExtension). Statuses are
// immutable once returned. A Framework is safe for concurrent use; a
// CycleState belongs to one attempt and is safe for the concurrent reads
// of Filter and Score.
package framework
