package framework

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "allot.dev/allot/api/core/v1"
)

// Schedule runs PreFilter, Filter (in parallel across nodes) and Score
// for pod over snap, and picks the highest-scoring feasible node (the
// first in name order on a tie). Each node records only its first
// rejection. It does not reserve or bind; the caller does, and runs
// RunPostFilter when no node fits.
func (f *Framework) Schedule(ctx context.Context, state *CycleState, snap *Snapshot, pod *corev1.Pod) *Diagnosis {
	return f.run(ctx, state, snap, pod, false)
}

// Diagnose runs the same pipeline as Schedule with a fresh CycleState,
// but asks every Filter plugin about every node and scores every feasible
// node, so that each "no" is reported. It has no side effects: PostFilter,
// Reserve and binding are not run. `allot explain` and simulations use it.
func Diagnose(ctx context.Context, fw *Framework, snap *Snapshot, pod *corev1.Pod) *Diagnosis {
	return fw.run(ctx, NewCycleState(), snap, pod, true)
}

func (f *Framework) run(ctx context.Context, state *CycleState, snap *Snapshot, pod *corev1.Pod, diagnose bool) *Diagnosis {
	d := &Diagnosis{Pod: pod.Namespace + "/" + pod.Name, NumNodes: snap.Len()}
	if st := f.runPreFilter(ctx, state, pod, snap); !st.IsSuccess() {
		d.Status = st
		if st.Code() != Error {
			d.PreFilter = st
		}
		return d
	}
	d.Nodes = make([]NodeResult, snap.Len())
	if st := f.runFilters(ctx, state, pod, snap, d, diagnose); st != nil {
		d.Status = st
		return d
	}
	feasible := d.Feasible()
	switch {
	case len(feasible) == 0:
		d.Status = noFit(d)
		return d
	case len(feasible) == 1 && !diagnose:
		d.Selected = feasible[0].Node
		return d
	}
	if st := f.runScore(ctx, state, pod, feasible, diagnose); st != nil {
		d.Status = st
		return d
	}
	best := feasible[0]
	for _, r := range feasible[1:] {
		if r.Score > best.Score {
			best = r
		}
	}
	d.Selected = best.Node
	return d
}

func (f *Framework) runPreFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, snap *Snapshot) *Status {
	for _, p := range f.preFilter {
		st := p.PreFilter(ctx, state, pod, snap)
		switch {
		case st.IsSkip():
			state.setSkipFilter(p.Name())
		case !st.IsSuccess():
			return st.WithPlugin(p.Name())
		}
	}
	return nil
}

// runFilters fills d.Nodes. It returns an Error status when a plugin
// failed or ctx ended before every node was judged.
//
// Unless all is set and when the framework has NodesToFind, it stops once
// enough nodes are feasible: filtering starts where the previous such
// cycle stopped, so that every node gets its turn, and d.Nodes keeps only
// the nodes looked at (still in name order).
func (f *Framework) runFilters(ctx context.Context, state *CycleState, pod *corev1.Pod, snap *Snapshot, d *Diagnosis, all bool) *Status {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var failed *Status
	nodes := snap.Nodes()
	n := len(nodes)
	skip := make([]bool, len(f.filter))
	for i, p := range f.filter {
		skip[i] = state.skipsFilter(p.Name())
	}
	want, start := n, 0
	if !all && f.nodesToFind != nil && n > 0 {
		want = f.nodesToFind(n)
	}
	var stop *atomic.Bool
	var feasible atomic.Int64
	if want < n {
		stop = &atomic.Bool{}
		start = int(f.nextStart.Load() % int64(n))
	}
	// Each node's first rejection goes into one array for the cycle.
	first := make([]*Status, n)
	parallelizeUntil(ctx, f.workers(n), n, stop, func(i int) {
		j := (start + i) % n
		rej := f.filterNode(ctx, state, pod, nodes[j], j, skip, all, first[j:j:j+1])
		if len(rej) == 0 {
			rej = nil
		}
		d.Nodes[j] = NodeResult{Node: nodes[j].Name(), Rejections: rej, info: nodes[j], index: j}
		if len(rej) > 0 && rej[len(rej)-1].Code() == Error {
			once.Do(func() { failed = rej[len(rej)-1]; cancel() })
		}
		if stop != nil && len(rej) == 0 && feasible.Add(1) >= int64(want) {
			stop.Store(true)
		}
	})
	if failed != nil {
		return failed
	}
	if err := ctx.Err(); err != nil {
		return AsStatus(fmt.Errorf("filter %d nodes: %w", n, err))
	}
	if stop != nil {
		// The nodes filtered are a prefix of the order from start, so one
		// or two runs of d.Nodes: count them here rather than with a
		// counter the goroutines share, and keep them in name order.
		done := 0
		for done < n && d.Nodes[(start+done)%n].info != nil {
			done++
		}
		f.nextStart.Store(int64((start + done) % n))
		if end := start + done; end <= n {
			d.Nodes = d.Nodes[start:end:end]
		} else {
			// [0, end-n) and [start, n): move the second run down.
			k := copy(d.Nodes[end-n:], d.Nodes[start:])
			d.Nodes = d.Nodes[: end-n+k : end-n+k]
		}
	}
	return nil
}

// filterNode returns the rejections of node j, appended to out; an Error
// stops it.
func (f *Framework) filterNode(ctx context.Context, state *CycleState, pod *corev1.Pod, ni *NodeInfo, j int, skip []bool, all bool, out []*Status) []*Status {
	for i, p := range f.filter {
		if skip[i] {
			continue
		}
		var st *Status
		if x := f.filterAt[i]; x != nil {
			st = x.FilterAt(ctx, state, pod, ni, j)
		} else {
			st = p.Filter(ctx, state, pod, ni)
		}
		if st.IsSuccess() {
			continue
		}
		out = append(out, normalize(st, p.Name()))
		if st.Code() == Error || !all {
			break
		}
	}
	return out
}

// noFit is the outcome when no node passed: Wait if some plugin waits,
// else Unschedulable if some node could fit after others leave, else
// UnschedulableAndUnresolvable.
func noFit(d *Diagnosis) *Status {
	code := UnschedulableAndUnresolvable
	for _, r := range d.Nodes {
		for _, st := range r.Rejections {
			switch {
			case st.Code() == Wait:
				return NewStatus(Wait, d.Message())
			case st.Code() == Unschedulable:
				code = Unschedulable
			}
		}
	}
	return NewStatus(code, d.Message())
}

// runScore scores the feasible nodes with every ScorePlugin, normalizes
// and weighs the scores, and sets each result's Score, and its Scores
// when diagnose is set.
func (f *Framework) runScore(ctx context.Context, state *CycleState, pod *corev1.Pod, feasible []*NodeResult, diagnose bool) *Status {
	if len(f.score) == 0 {
		return nil
	}
	// One array for all plugins' scores: a cycle scores hundreds of nodes.
	all := make([]NodeScore, len(f.score)*len(feasible))
	scores := make([][]NodeScore, len(f.score))
	for j := range f.score {
		scores[j] = all[j*len(feasible) : (j+1)*len(feasible) : (j+1)*len(feasible)]
	}
	// A plugin whose PreFilter returned Skip has nothing to say about this
	// pod: its scores stay zero for every node (no per-node calls).
	skip := make([]bool, len(f.score))
	for j, p := range f.score {
		skip[j] = state.skipsFilter(p.Name())
	}
	errs := make([]*Status, len(feasible))
	parallelize(ctx, f.workers(len(feasible)), len(feasible), func(i int) {
		r := feasible[i]
		for j, p := range f.score {
			if skip[j] {
				scores[j][i] = NodeScore{Name: r.Node}
				continue
			}
			var s int64
			var st *Status
			if x := f.scoreAt[j]; x != nil {
				s, st = x.ScoreAt(ctx, state, pod, r.info, r.index)
			} else {
				s, st = p.Score(ctx, state, pod, r.info)
			}
			if !st.IsSuccess() {
				errs[i] = AsStatus(fmt.Errorf("score node %s: %s", r.Node, st.Message())).WithPlugin(p.Name())
				return
			}
			scores[j][i] = NodeScore{Name: r.Node, Score: s}
		}
	})
	for _, st := range errs {
		if st != nil {
			return st
		}
	}
	if err := ctx.Err(); err != nil {
		return AsStatus(fmt.Errorf("score %d nodes: %w", len(feasible), err))
	}
	return f.weigh(ctx, state, pod, feasible, scores, diagnose)
}

func (f *Framework) weigh(ctx context.Context, state *CycleState, pod *corev1.Pod, feasible []*NodeResult, scores [][]NodeScore, diagnose bool) *Status {
	var parts []PluginScore
	if diagnose {
		parts = make([]PluginScore, len(feasible)*len(f.score))
	}
	for j, p := range f.score {
		if n, ok := p.ScorePlugin.(ScoreNormalizer); ok {
			if st := n.NormalizeScore(ctx, state, pod, scores[j]); !st.IsSuccess() {
				return AsStatus(fmt.Errorf("normalize scores: %s", st.Message())).WithPlugin(p.Name())
			}
		}
		for i, s := range scores[j] {
			if s.Score < MinNodeScore || s.Score > MaxNodeScore {
				return AsStatus(fmt.Errorf("score %d of node %s is outside [%d, %d]", s.Score, s.Name, MinNodeScore, MaxNodeScore)).WithPlugin(p.Name())
			}
			r := feasible[i]
			if diagnose {
				if r.Scores == nil {
					r.Scores = parts[i*len(f.score) : i*len(f.score) : (i+1)*len(f.score)]
				}
				r.Scores = append(r.Scores, PluginScore{Plugin: p.Name(), Score: s.Score, Weight: p.weight})
			}
			r.Score += s.Score * p.weight
		}
	}
	return nil
}
