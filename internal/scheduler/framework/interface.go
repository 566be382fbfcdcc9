package framework

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// MaxNodeScore is the highest score a ScorePlugin gives a node after
// normalization; MinNodeScore the lowest.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// Plugin is the base of every plugin: a unique name, used in statuses,
// weights, logs and `allot explain`.
type Plugin interface {
	Name() string
}

// Every method below receives the pod being scheduled; it is shared with
// the scheduler's cache and must not be modified. The context carries the
// cycle's deadline (or the bind deadline); plugins that block must honour
// it. Plugins are called concurrently for different nodes of one cycle
// (Filter, Score) but never for two cycles at once with the same
// CycleState.

// PreFilterPlugin checks the pod once per cycle before any node is
// looked at, and prepares what Filter and Score need in the CycleState.
// Returning Skip skips this plugin's Filter and Score for the pod; a rejection or
// Wait stops the cycle for every node.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, snap *Snapshot) *Status
}

// FilterPlugin decides whether the pod fits one node. Filter must only
// read the NodeInfo and the CycleState: it runs in parallel across nodes.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *corev1.Pod, node *NodeInfo) *Status
}

// IndexedFilterPlugin is a FilterPlugin that is also told the node's
// position i in the cycle's Snapshot.Nodes, so that it can keep per-node
// results of the cycle in a slice rather than a map by name. The
// framework calls FilterAt instead of Filter.
type IndexedFilterPlugin interface {
	FilterPlugin
	FilterAt(ctx context.Context, state *CycleState, pod *corev1.Pod, node *NodeInfo, i int) *Status
}

// PostFilterPlugin runs when no node fits, with every node's rejection.
// Success means the plugin changed something that may let the pod fit
// (made room, released a claim): the pod is retried after backoff instead
// of waiting for an event. PostFilter may write to the API server, so it
// runs only in the scheduler, never in Diagnose.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, d *Diagnosis) *Status
}

// ScorePlugin ranks a feasible node. Scores are summed across plugins,
// each times its weight, after normalization.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *corev1.Pod, node *NodeInfo) (int64, *Status)
}

// IndexedScorePlugin is a ScorePlugin that is also told the node's
// position in the cycle's Snapshot.Nodes (see IndexedFilterPlugin); the
// framework calls ScoreAt instead of Score.
type IndexedScorePlugin interface {
	ScorePlugin
	ScoreAt(ctx context.Context, state *CycleState, pod *corev1.Pod, node *NodeInfo, i int) (int64, *Status)
}

// ScoreNormalizer is implemented by ScorePlugins whose raw scores are not
// already in [MinNodeScore, MaxNodeScore]: it rescales the scores of all
// feasible nodes in place.
type ScoreNormalizer interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *corev1.Pod, scores []NodeScore) *Status
}

// NodeScore is one node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// ReservePlugin sets aside what the pod will use on the chosen node
// (in-memory, before binding) so that the next cycles do not hand it out
// again. Unreserve undoes it when a later step fails; it must be
// idempotent and must not fail. Reserve runs in the scheduling loop;
// Unreserve may run in a binding goroutine.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string)
}

// BindContributor adds to the one Binding that commits the pod: claim
// allocations and reservations (Binding.ResourceClaims) and the
// allocation fences that guard them (Binding.AllocationFences). It runs in
// the pod's binding goroutine after Reserve, in plugin order, and the
// scheduler then posts the Binding once, atomically. Returning Wait
// abandons this attempt (the reservation is undone) and parks the pod
// until a registered event; any other failure retries it with backoff.
type BindContributor interface {
	Plugin
	ContributeBinding(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string, b *corev1.Binding) *Status
}

// BindClaimMaker is a plugin whose Binding may name a ResourceClaim that
// must be created first: the claim of a pod's extended resources served by
// DRA, built in memory during the cycle. After the BindContributors ran,
// the scheduler creates ClaimToCreate's claim (nil: none; it has a
// generateName), hands the stored claim to ClaimCreated, which names it in
// the Binding, posts the Binding, and deletes the claim when the API
// server refuses the binding.
type BindClaimMaker interface {
	Plugin
	ClaimToCreate(state *CycleState) *resourcev1.ResourceClaim
	ClaimCreated(state *CycleState, b *corev1.Binding, created *resourcev1.ResourceClaim) error
}

// PostBindPlugin learns that a pod's Binding was committed, and at which
// revision (the resourceVersion the API server answered with; "" when
// unknown). It runs in the binding goroutine, must not block and cannot
// fail; the DRA plugin uses it to fence its next allocations on the node.
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName, revision string)
}
