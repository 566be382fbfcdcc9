package framework

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	corev1 "allot.dev/allot/api/core/v1"
)

// Options configure a Framework.
type Options struct {
	// Parallelism bounds the goroutines that filter and score nodes in
	// one cycle; 1 runs everything on the caller's goroutine. 0 means one
	// goroutine per NodesPerWorker nodes, at most GOMAXPROCS.
	Parallelism int
	// Weights multiply ScorePlugins' normalized scores, by plugin name;
	// plugins not listed weigh 1.
	Weights map[string]int64
	// NodesToFind, when set, is how many feasible nodes Schedule looks
	// for among n nodes before it stops filtering and scores those (see
	// NodesToFind); nil looks at every node. Diagnose always looks at
	// every node.
	NodesToFind func(n int) int
}

type weightedScore struct {
	ScorePlugin
	weight int64
}

// Framework runs a fixed list of plugins at the extension points each
// implements, in list order. It is safe for concurrent use by the
// scheduler, Diagnose and simulations alike; the only state it keeps
// between calls is where the next Schedule that stops early starts
// filtering.
type Framework struct {
	names       []string
	preFilter   []PreFilterPlugin
	filter      []FilterPlugin
	filterAt    []IndexedFilterPlugin // parallel to filter, nil where not implemented
	postFilter  []PostFilterPlugin
	score       []weightedScore
	scoreAt     []IndexedScorePlugin // parallel to score, nil where not implemented
	reserve     []ReservePlugin
	bind        []BindContributor
	claimMaker  []BindClaimMaker
	postBind    []PostBindPlugin
	events      map[string][]ClusterEventWithHint
	parallelism int // 0: by the number of nodes (workers)
	nodesToFind func(n int) int
	nextStart   atomic.Int64 // index of the node the next early-stopping Schedule filters first
}

// New sorts plugins into the extension points they implement. Names must
// be unique and non-empty; weights must name score plugins and be
// positive.
func New(plugins []Plugin, opts Options) (*Framework, error) {
	f := &Framework{events: map[string][]ClusterEventWithHint{}, parallelism: max(opts.Parallelism, 0), nodesToFind: opts.NodesToFind}
	for _, p := range plugins {
		name := p.Name()
		if name == "" || slices.Contains(f.names, name) {
			return nil, fmt.Errorf("build framework: plugin name %q is empty or used twice", name)
		}
		f.names = append(f.names, name)
		if err := f.add(p, opts.Weights); err != nil {
			return nil, err
		}
	}
	for name, w := range opts.Weights {
		if !slices.ContainsFunc(f.score, func(s weightedScore) bool { return s.Name() == name }) || w <= 0 {
			return nil, fmt.Errorf("build framework: weight %d for %q: not a score plugin or not positive", w, name)
		}
	}
	return f, nil
}

func (f *Framework) add(p Plugin, weights map[string]int64) error {
	used := false
	if x, ok := p.(PreFilterPlugin); ok {
		f.preFilter, used = append(f.preFilter, x), true
	}
	if x, ok := p.(FilterPlugin); ok {
		f.filter, used = append(f.filter, x), true
		ix, _ := p.(IndexedFilterPlugin)
		f.filterAt = append(f.filterAt, ix)
	}
	if x, ok := p.(PostFilterPlugin); ok {
		f.postFilter, used = append(f.postFilter, x), true
	}
	if x, ok := p.(ScorePlugin); ok {
		w := weights[p.Name()]
		if w == 0 {
			w = 1
		}
		f.score, used = append(f.score, weightedScore{x, w}), true
		ix, _ := p.(IndexedScorePlugin)
		f.scoreAt = append(f.scoreAt, ix)
	}
	if x, ok := p.(ReservePlugin); ok {
		f.reserve, used = append(f.reserve, x), true
	}
	if x, ok := p.(BindContributor); ok {
		f.bind, used = append(f.bind, x), true
	}
	if x, ok := p.(BindClaimMaker); ok {
		f.claimMaker, used = append(f.claimMaker, x), true
	}
	if x, ok := p.(PostBindPlugin); ok {
		f.postBind, used = append(f.postBind, x), true
	}
	if x, ok := p.(EnqueueExtensions); ok {
		f.events[p.Name()] = x.EventsToRegister()
	}
	if !used {
		return fmt.Errorf("build framework: plugin %q implements no extension point", p.Name())
	}
	return nil
}

// PluginNames returns the plugins in order.
func (f *Framework) PluginNames() []string { return slices.Clone(f.names) }

// NodesPerWorker is how many nodes a cycle needs per goroutine that
// filters or scores them when Options.Parallelism is 0. Judging a node
// takes about a microsecond, mostly waiting for memory; below about a
// millisecond of work per goroutine, goroutines that share the nodes'
// data cost more than they save. Measured with
// BenchmarkDRACycles500Nodes on two cores: two goroutines made each
// cycle 30 % slower and used 40 % more CPU than one.
const NodesPerWorker = 1000

// workers is the number of goroutines for n nodes.
func (f *Framework) workers(n int) int {
	if f.parallelism > 0 {
		return f.parallelism
	}
	return max(1, min(runtime.GOMAXPROCS(0), n/NodesPerWorker))
}

// EventsToRegister returns, per plugin name, the cluster events that may
// make a pod it rejected schedulable. The map is a copy.
func (f *Framework) EventsToRegister() map[string][]ClusterEventWithHint {
	out := make(map[string][]ClusterEventWithHint, len(f.events))
	for k, v := range f.events {
		out[k] = slices.Clone(v)
	}
	return out
}

// EventResources lists every resource some plugin registered an event
// for, so the scheduler watches only what matters.
func (f *Framework) EventResources() []EventResource {
	var out []EventResource
	for _, evs := range f.events {
		for _, e := range evs {
			if !slices.Contains(out, e.Event.Resource) {
				out = append(out, e.Event.Resource)
			}
		}
	}
	slices.Sort(out)
	return out
}

// RunReserve calls every ReservePlugin's Reserve in order. On the first
// failure it calls every plugin's Unreserve (in reverse order) and
// returns the failure.
func (f *Framework) RunReserve(ctx context.Context, state *CycleState, pod *corev1.Pod, node string) *Status {
	for _, p := range f.reserve {
		st := p.Reserve(ctx, state, pod, node)
		if st.IsSuccess() {
			continue
		}
		f.RunUnreserve(ctx, state, pod, node)
		return normalize(st, p.Name())
	}
	return nil
}

// RunUnreserve calls every ReservePlugin's Unreserve in reverse order.
func (f *Framework) RunUnreserve(ctx context.Context, state *CycleState, pod *corev1.Pod, node string) {
	for i := len(f.reserve) - 1; i >= 0; i-- {
		f.reserve[i].Unreserve(ctx, state, pod, node)
	}
}

// RunBindContributors lets each BindContributor add to b, stopping at the
// first that does not succeed.
func (f *Framework) RunBindContributors(ctx context.Context, state *CycleState, pod *corev1.Pod, node string, b *corev1.Binding) *Status {
	for _, p := range f.bind {
		if st := p.ContributeBinding(ctx, state, pod, node, b); !st.IsSuccess() {
			return normalize(st, p.Name())
		}
	}
	return nil
}

// BindClaimMakers returns the plugins that may need a claim created
// before the Binding is posted, in order.
func (f *Framework) BindClaimMakers() []BindClaimMaker { return f.claimMaker }

// RunPostBind tells every PostBindPlugin, in order, that the pod was bound
// at revision.
func (f *Framework) RunPostBind(ctx context.Context, state *CycleState, pod *corev1.Pod, node, revision string) {
	for _, p := range f.postBind {
		p.PostBind(ctx, state, pod, node, revision)
	}
}

// RunPostFilter runs the PostFilter plugins after no node fit, until one
// succeeds. It returns that success, or the last failure (nil when there
// are no PostFilter plugins).
func (f *Framework) RunPostFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, d *Diagnosis) *Status {
	var last *Status
	for _, p := range f.postFilter {
		st := p.PostFilter(ctx, state, pod, d)
		if st.IsSuccess() {
			return NewStatus(Success).WithPlugin(p.Name())
		}
		last = normalize(st, p.Name())
		if st.Code() == Error {
			return last
		}
	}
	return last
}

// normalize attributes a non-success status to its plugin; a Skip outside
// PreFilter is an error in the plugin.
func normalize(st *Status, plugin string) *Status {
	if st.IsSkip() {
		st = NewStatus(Error, fmt.Sprintf("plugin %s returned Skip outside PreFilter", plugin))
	}
	if st.Plugin() == plugin {
		return st // a plugin may share statuses it stamped itself
	}
	return st.WithPlugin(plugin)
}

// MinNodesToFind is the fewest feasible nodes NodesToFind asks for, as in
// kube-scheduler: with fewer nodes, every node is looked at.
const MinNodesToFind = 100

// NodesToFind returns the NodesToFind option for a percentage of the
// nodes, as kube-scheduler's percentageOfNodesToScore: 0 is adaptive (50 %
// minus one point per 125 nodes, at least 5 %), 100 or more every node;
// the answer is never below MinNodesToFind.
func NodesToFind(percentage int) func(n int) int {
	if percentage >= 100 {
		return nil
	}
	return func(n int) int {
		if n < MinNodesToFind {
			return n
		}
		p := percentage
		if p <= 0 {
			p = max(50-n/125, 5)
		}
		return min(max(n*p/100, MinNodesToFind), n)
	}
}
