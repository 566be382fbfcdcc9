package framework_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	fw "allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

func newFramework(t testing.TB, ps []fw.Plugin, opts fw.Options) *fw.Framework {
	t.Helper()
	f, err := fw.New(ps, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func nodes(names ...string) *fw.Snapshot {
	var ns []*corev1.Node
	for _, n := range names {
		ns = append(ns, makeNode(n).Alloc("cpu", "4").Obj())
	}
	return fw.NewSnapshot(ns, nil)
}

func TestUnschedulableMessage(t *testing.T) {
	f, err := plugins.NewDefaultFramework(plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := fw.NewSnapshot([]*corev1.Node{
		makeNode("a").Alloc("cpu", "4").Obj(),
		makeNode("b").Alloc("cpu", "1").Label("disk", "ssd").Obj(),
		makeNode("c").Alloc("cpu", "1").Label("disk", "ssd").Obj(),
	}, nil)
	pod := makePod("p").Req("cpu", "2").NodeSelector("disk", "ssd").Obj()
	d := f.Schedule(context.Background(), fw.NewCycleState(), snap, pod)
	want := "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu."
	if got := d.Message(); got != want {
		t.Fatalf("Message =\n %q\nwant\n %q", got, want)
	}
	if d.Status.Code() != fw.Unschedulable {
		t.Fatalf("code = %v, want Unschedulable (cpu may free up)", d.Status.Code())
	}
	if got := d.RejectingPlugins(); !slices.Equal(got, []string{"NodeAffinity", "NodeResourcesFit"}) {
		t.Fatalf("RejectingPlugins = %v", got)
	}
}

func TestNoNodes(t *testing.T) {
	f := newFramework(t, []fw.Plugin{rejectNodes("A", fw.Unschedulable, "x")}, fw.Options{})
	d := f.Schedule(context.Background(), fw.NewCycleState(), nodes(), makePod("p").Obj())
	if d.Status.Code() != fw.UnschedulableAndUnresolvable || d.Message() != fw.NoNodesMessage || len(d.RejectingPlugins()) != 0 {
		t.Fatalf("diagnosis = %v %q %v", d.Status, d.Message(), d.RejectingPlugins())
	}
}

func TestOutcomeCode(t *testing.T) {
	tests := map[string]struct {
		filters []fw.Plugin
		want    fw.Code
	}{
		"all unresolvable": {[]fw.Plugin{rejectNodes("A", fw.UnschedulableAndUnresolvable, "no", "n1", "n2")}, fw.UnschedulableAndUnresolvable},
		"one resolvable": {[]fw.Plugin{
			rejectNodes("A", fw.UnschedulableAndUnresolvable, "no", "n1"),
			rejectNodes("B", fw.Unschedulable, "full", "n2"),
		}, fw.Unschedulable},
		"a wait wins": {[]fw.Plugin{
			rejectNodes("A", fw.Unschedulable, "full", "n1"),
			rejectNodes("B", fw.Wait, "waiting for claim", "n2"),
		}, fw.Wait},
		"one node fits": {[]fw.Plugin{rejectNodes("A", fw.Unschedulable, "full", "n1")}, fw.Success},
		"error":         {[]fw.Plugin{rejectNodes("A", fw.Error, "broken", "n2")}, fw.Error},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFramework(t, tc.filters, fw.Options{})
			d := f.Schedule(context.Background(), fw.NewCycleState(), nodes("n1", "n2"), makePod("p").Obj())
			if d.Status.Code() != tc.want {
				t.Fatalf("outcome = %v, want %v", d.Status, tc.want)
			}
		})
	}
}

func TestPreFilterStops(t *testing.T) {
	for name, tc := range map[string]struct {
		st      *fw.Status
		message string
	}{
		"rejection": {fw.NewStatus(fw.UnschedulableAndUnresolvable, "pod uses a claim that does not exist"), "0/2 nodes are available: pod uses a claim that does not exist."},
		"wait":      {fw.NewStatus(fw.Wait, "waiting for claim c to be created"), "waiting for claim c to be created"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFramework(t, []fw.Plugin{&preFilterPlugin{name: "Claims", st: tc.st}}, fw.Options{})
			d := f.Schedule(context.Background(), fw.NewCycleState(), nodes("n1", "n2"), makePod("p").Obj())
			if d.PreFilter == nil || d.PreFilter.Plugin() != "Claims" || len(d.Nodes) != 0 {
				t.Fatalf("diagnosis = %+v", d)
			}
			if d.Message() != tc.message || d.Status.Code() != tc.st.Code() {
				t.Fatalf("message %q code %v", d.Message(), d.Status.Code())
			}
			if !slices.Equal(d.RejectingPlugins(), []string{"Claims"}) {
				t.Fatalf("RejectingPlugins = %v", d.RejectingPlugins())
			}
		})
	}
}

func TestPreFilterSkip(t *testing.T) {
	f := newFramework(t, []fw.Plugin{skipFilter{}}, fw.Options{})
	d := f.Schedule(context.Background(), fw.NewCycleState(), nodes("n1"), makePod("p").Obj())
	if !d.Status.IsSuccess() || d.Selected != "n1" {
		t.Fatalf("skipped filter ran: %+v", d.Status)
	}
}

func TestDiagnoseReportsEveryRejection(t *testing.T) {
	ps := []fw.Plugin{
		rejectNodes("A", fw.UnschedulableAndUnresolvable, "wrong label", "n1"),
		rejectNodes("B", fw.Unschedulable, "Insufficient cpu", "n1", "n2"),
	}
	f := newFramework(t, ps, fw.Options{})
	snap := nodes("n1", "n2", "n3")
	sched := f.Schedule(context.Background(), fw.NewCycleState(), snap, makePod("p").Obj())
	if r, _ := sched.Node("n1"); len(r.Rejections) != 1 || r.Rejections[0].Plugin() != "A" {
		t.Fatalf("Schedule should stop at the first rejection: %v", r.Rejections)
	}
	diag := fw.Diagnose(context.Background(), f, snap, makePod("p").Obj())
	r, _ := diag.Node("n1")
	if len(r.Rejections) != 2 || r.Rejections[1].Plugin() != "B" {
		t.Fatalf("Diagnose should report every rejection: %v", r.Rejections)
	}
	if diag.Selected != "n3" {
		t.Fatalf("Selected = %q", diag.Selected)
	}
	// A node counts once per distinct reason; the message stays kube's.
	if got := diag.Message(); got != "0/3 nodes are available: 1 wrong label, 2 Insufficient cpu." {
		t.Fatalf("Message = %q", got)
	}
}

func TestScoring(t *testing.T) {
	a := &scorePlugin{name: "A", scores: map[string]int64{"n1": 10, "n2": 20, "n3": 40}}
	b := &scorePlugin{name: "B", scores: map[string]int64{"n1": 100, "n2": 0, "n3": 0}}
	f := newFramework(t, []fw.Plugin{normalizedScore{a}, b}, fw.Options{Weights: map[string]int64{"B": 2}})
	d := fw.Diagnose(context.Background(), f, nodes("n1", "n2", "n3"), makePod("p").Obj())
	// A normalized: 25, 50, 100. Totals: n1 25+200, n2 50, n3 100.
	want := map[string]int64{"n1": 225, "n2": 50, "n3": 100}
	for _, r := range d.Nodes {
		if r.Score != want[r.Node] {
			t.Errorf("%s: score %d, want %d (%+v)", r.Node, r.Score, want[r.Node], r.Scores)
		}
	}
	if d.Selected != "n1" {
		t.Fatalf("Selected = %s", d.Selected)
	}
	if s := d.Nodes[0].Scores; len(s) != 2 || s[1] != (fw.PluginScore{Plugin: "B", Score: 100, Weight: 2}) {
		t.Fatalf("plugin scores = %+v", s)
	}
}

func TestTieGoesToFirstName(t *testing.T) {
	same := &scorePlugin{name: "S", scores: map[string]int64{"a": 5, "b": 5, "c": 5}}
	f := newFramework(t, []fw.Plugin{same}, fw.Options{})
	d := f.Schedule(context.Background(), fw.NewCycleState(), nodes("c", "b", "a"), makePod("p").Obj())
	if d.Selected != "a" {
		t.Fatalf("Selected = %s, want a", d.Selected)
	}
}

func TestScoreOutOfRange(t *testing.T) {
	bad := &scorePlugin{name: "Bad", scores: map[string]int64{"n1": 500, "n2": 1}}
	f := newFramework(t, []fw.Plugin{bad}, fw.Options{})
	d := f.Schedule(context.Background(), fw.NewCycleState(), nodes("n1", "n2"), makePod("p").Obj())
	if d.Status.Code() != fw.Error || d.Status.Plugin() != "Bad" {
		t.Fatalf("status = %v", d.Status)
	}
}

func TestCancelledContextIsAnError(t *testing.T) {
	f := newFramework(t, []fw.Plugin{rejectNodes("A", fw.Unschedulable, "x")}, fw.Options{Parallelism: 4})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := f.Schedule(ctx, fw.NewCycleState(), nodes("n1", "n2"), makePod("p").Obj())
	if d.Status.Code() != fw.Error {
		t.Fatalf("status = %v, want Error: unjudged nodes must not look feasible", d.Status)
	}
}

// TestParallelFilters compares parallel and sequential filtering over many
// nodes; run with -race.
func TestParallelFilters(t *testing.T) {
	var names []string
	for i := range 1000 {
		names = append(names, fmt.Sprintf("n%04d", i))
	}
	snap := nodes(names...)
	mod := &filterPlugin{name: "Mod", fn: func(_ *corev1.Pod, ni *fw.NodeInfo) *fw.Status {
		if i := nodeNum(ni); i%7 != 3 {
			return fw.NewStatus(fw.Unschedulable, fmt.Sprintf("mod %d", i%7))
		}
		return nil
	}}
	run := func(par int) *fw.Diagnosis {
		f := newFramework(t, []fw.Plugin{mod, numScore{}}, fw.Options{Parallelism: par})
		return f.Schedule(context.Background(), fw.NewCycleState(), snap, makePod("p").Obj())
	}
	seq, par := run(1), run(8)
	if seq.Selected != par.Selected || seq.Selected != "n0990" {
		t.Fatalf("selected %s (sequential) vs %s (parallel)", seq.Selected, par.Selected)
	}
	for i := range seq.Nodes {
		s, p := seq.Nodes[i], par.Nodes[i]
		if s.Node != p.Node || s.Feasible() != p.Feasible() || s.Score != p.Score {
			t.Fatalf("node %d differs: %+v vs %+v", i, s, p)
		}
	}
	if len(par.Feasible()) != 143 || seq.Message() != par.Message() {
		t.Fatalf("feasible = %d; messages %q vs %q", len(par.Feasible()), seq.Message(), par.Message())
	}
}

func nodeNum(ni *fw.NodeInfo) int64 {
	var i int64
	fmt.Sscanf(ni.Name(), "n%d", &i)
	return i
}

// numScore scores by the node's number, a tenth of it.
type numScore struct{}

func (numScore) Name() string { return "Num" }
func (numScore) Score(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, ni *fw.NodeInfo) (int64, *fw.Status) {
	return nodeNum(ni) / 10, nil
}

func TestReserveAndBind(t *testing.T) {
	var calls []string
	r1 := &recorder{name: "R1", calls: &calls}
	r2 := &recorder{name: "R2", calls: &calls, reserve: fw.NewStatus(fw.Unschedulable, "gone")}
	f := newFramework(t, []fw.Plugin{r1, r2}, fw.Options{})
	ctx, state, pod := context.Background(), fw.NewCycleState(), makePod("p").Obj()
	st := f.RunReserve(ctx, state, pod, "n1")
	if st.Code() != fw.Unschedulable || st.Plugin() != "R2" {
		t.Fatalf("RunReserve = %v", st)
	}
	want := "R1.Reserve(n1) R2.Reserve(n1) R2.Unreserve(n1) R1.Unreserve(n1)"
	if got := strings.Join(calls, " "); got != want {
		t.Fatalf("calls = %s\nwant  %s", got, want)
	}
	calls = nil
	r1.bind = fw.NewStatus(fw.Wait, "driver is allocating")
	b := &corev1.Binding{}
	if st := f.RunBindContributors(ctx, state, pod, "n1", b); st.Code() != fw.Wait || st.Plugin() != "R1" {
		t.Fatalf("RunBindContributors = %v", st)
	}
	if len(calls) != 1 || len(b.ResourceClaims) != 1 {
		t.Fatalf("contributors should stop at the first failure: %v", calls)
	}
	r1.bind = nil
	b = &corev1.Binding{}
	if st := f.RunBindContributors(ctx, state, pod, "n1", b); !st.IsSuccess() || len(b.ResourceClaims) != 2 {
		t.Fatalf("RunBindContributors = %v, claims %v", st, b.ResourceClaims)
	}
}

func TestPostFilter(t *testing.T) {
	f := newFramework(t, []fw.Plugin{postFilter{st: fw.NewStatus(fw.Unschedulable, "nothing to evict")}}, fw.Options{})
	if st := f.RunPostFilter(context.Background(), nil, makePod("p").Obj(), &fw.Diagnosis{}); st.Code() != fw.Unschedulable || st.Plugin() != "Post" {
		t.Fatalf("RunPostFilter = %v", st)
	}
	f = newFramework(t, []fw.Plugin{postFilter{}}, fw.Options{})
	if st := f.RunPostFilter(context.Background(), nil, makePod("p").Obj(), &fw.Diagnosis{}); st == nil || !st.IsSuccess() {
		t.Fatalf("RunPostFilter = %v, want a non-nil Success", st)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	a := rejectNodes("A", fw.Unschedulable, "x")
	for name, tc := range map[string]struct {
		ps   []fw.Plugin
		opts fw.Options
	}{
		"duplicate":          {[]fw.Plugin{a, a}, fw.Options{}},
		"weight, not scorer": {[]fw.Plugin{a}, fw.Options{Weights: map[string]int64{"A": 2}}},
		"no extension point": {[]fw.Plugin{named("X")}, fw.Options{}},
	} {
		if _, err := fw.New(tc.ps, tc.opts); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

type named string

func (n named) Name() string { return string(n) }

func TestEventsToRegister(t *testing.T) {
	f, err := plugins.NewDefaultFramework(plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := f.EventsToRegister()
	if len(ev["NodeResourcesFit"]) == 0 || len(ev["NodeAffinity"]) == 0 {
		t.Fatalf("EventsToRegister = %v", ev)
	}
	want := []fw.EventResource{fw.AssignedPod, fw.DeviceClass, fw.DeviceTaintRule, fw.Node, fw.NodeResourceSlice, fw.PodSchedulingContext, fw.ResourceClaim,
		fw.ResourceClaimV1, fw.ResourceClaimParams, fw.ResourceClass, fw.ResourceClassParams, fw.ResourceSlice} // DynamicResources is a default plugin
	if got := f.EventResources(); !slices.Equal(got, want) {
		t.Fatalf("EventResources = %v", got)
	}
}

func TestNodesToFind(t *testing.T) {
	for _, tc := range []struct{ percentage, nodes, want int }{
		{0, 50, 50}, {0, 100, 100}, {0, 300, 144}, {0, 500, 230}, {0, 1000, 420}, {0, 10000, 500},
		{10, 500, 100}, {30, 1000, 300}, {99, 1000, 990},
	} {
		if got := fw.NodesToFind(tc.percentage)(tc.nodes); got != tc.want {
			t.Errorf("NodesToFind(%d)(%d) = %d, want %d", tc.percentage, tc.nodes, got, tc.want)
		}
	}
	if fw.NodesToFind(100) != nil {
		t.Error("NodesToFind(100) is not nil: every node should be filtered")
	}
}

// TestScheduleStopsAtEnoughFeasibleNodes: with NodesToFind, Schedule stops
// filtering once enough nodes are feasible, starts the next cycle where
// this one stopped (wrapping around), and looks at every node when too few
// fit; Diagnose always looks at every node.
func TestScheduleStopsAtEnoughFeasibleNodes(t *testing.T) {
	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("n%04d", i))
	}
	snap := nodes(names...)
	odd := &filterPlugin{name: "Odd", fn: func(_ *corev1.Pod, ni *fw.NodeInfo) *fw.Status {
		if nodeNum(ni)%2 == 1 {
			return fw.NewStatus(fw.Unschedulable, "odd")
		}
		return nil
	}}
	f := newFramework(t, []fw.Plugin{odd, numScore{}}, fw.Options{Parallelism: 1, NodesToFind: fw.NodesToFind(0)})
	// 144 feasible nodes wanted of 300; every other node fits, so the
	// first cycle looks at n0000..n0286 and picks the best of those (n0280 to n0286 score 28; the first name wins).
	d := f.Schedule(context.Background(), fw.NewCycleState(), snap, makePod("p").Obj())
	if len(d.Nodes) != 287 || len(d.Feasible()) != 144 || d.Selected != "n0280" || d.NumNodes != 300 {
		t.Fatalf("first cycle: %d nodes looked at, %d feasible, selected %s, of %d; want 287, 144, n0280, 300",
			len(d.Nodes), len(d.Feasible()), d.Selected, d.NumNodes)
	}
	if !slices.IsSortedFunc(d.Nodes, func(a, b fw.NodeResult) int { return strings.Compare(a.Node, b.Node) }) {
		t.Fatal("nodes looked at are not in name order")
	}
	// The second starts at n0287 and wraps around to n0000.
	d = f.Schedule(context.Background(), fw.NewCycleState(), snap, makePod("p").Obj())
	if r, ok := d.Node("n0287"); !ok || r.Feasible() {
		t.Fatalf("second cycle did not start at n0287: %+v", d.Nodes[len(d.Nodes)-1])
	}
	if _, ok := d.Node("n0000"); !ok || len(d.Feasible()) != 144 || d.Selected != "n0290" {
		t.Fatalf("second cycle: %d feasible, selected %s; want 144 with a wrap-around, n0290", len(d.Feasible()), d.Selected)
	}
	if !slices.IsSortedFunc(d.Nodes, func(a, b fw.NodeResult) int { return strings.Compare(a.Node, b.Node) }) || len(d.Nodes) != 288 {
		t.Fatalf("second cycle: %d nodes looked at, want 288 (from the odd n0287) in name order across the wrap-around", len(d.Nodes))
	}
	// Diagnose ignores the option.
	if d := fw.Diagnose(context.Background(), f, snap, makePod("p").Obj()); len(d.Nodes) != 300 || len(d.Feasible()) != 150 {
		t.Fatalf("Diagnose looked at %d nodes, %d feasible; want all 300, 150", len(d.Nodes), len(d.Feasible()))
	}
	// Too few feasible nodes: every node is looked at.
	few := &filterPlugin{name: "Few", fn: func(_ *corev1.Pod, ni *fw.NodeInfo) *fw.Status {
		if nodeNum(ni)%10 != 0 {
			return fw.NewStatus(fw.Unschedulable, "not a tenth")
		}
		return nil
	}}
	f = newFramework(t, []fw.Plugin{few}, fw.Options{Parallelism: 2, NodesToFind: fw.NodesToFind(0)})
	if d := f.Schedule(context.Background(), fw.NewCycleState(), snap, makePod("p").Obj()); len(d.Nodes) != 300 || len(d.Feasible()) != 30 {
		t.Fatalf("with 30 feasible nodes: looked at %d, found %d; want 300, 30", len(d.Nodes), len(d.Feasible()))
	}
}

// indexedPlugin checks that the framework hands FilterAt and ScoreAt each
// node's position in the snapshot, and that Filter and Score are not
// called beside them.
type indexedPlugin struct {
	t     *testing.T
	snap  *fw.Snapshot
	mu    sync.Mutex
	calls map[string]int
}

func (p *indexedPlugin) Name() string { return "Indexed" }
func (p *indexedPlugin) at(what string, ni *fw.NodeInfo, i int) {
	if got := p.snap.Nodes()[i]; got != ni {
		p.t.Errorf("%s: position %d is %s, not %s", what, i, got.Name(), ni.Name())
	}
	p.mu.Lock()
	p.calls[what]++
	p.mu.Unlock()
}
func (p *indexedPlugin) Filter(context.Context, *fw.CycleState, *corev1.Pod, *fw.NodeInfo) *fw.Status {
	p.t.Error("Filter called on an IndexedFilterPlugin")
	return nil
}
func (p *indexedPlugin) FilterAt(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, ni *fw.NodeInfo, i int) *fw.Status {
	p.at("filter", ni, i)
	return nil
}
func (p *indexedPlugin) Score(context.Context, *fw.CycleState, *corev1.Pod, *fw.NodeInfo) (int64, *fw.Status) {
	p.t.Error("Score called on an IndexedScorePlugin")
	return 0, nil
}
func (p *indexedPlugin) ScoreAt(_ context.Context, _ *fw.CycleState, _ *corev1.Pod, ni *fw.NodeInfo, i int) (int64, *fw.Status) {
	p.at("score", ni, i)
	return int64(i), nil
}

func TestIndexedPluginsGetPositions(t *testing.T) {
	snap := nodes("n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7")
	p := &indexedPlugin{t: t, snap: snap, calls: map[string]int{}}
	// n2 rejected by an earlier plugin: its feasible neighbours keep their
	// positions in scoring.
	f := newFramework(t, []fw.Plugin{rejectNodes("R", fw.Unschedulable, "no", "n2"), p}, fw.Options{Parallelism: 3})
	d := f.Schedule(context.Background(), fw.NewCycleState(), snap, makePod("p").Obj())
	if d.Selected != "n7" {
		t.Fatalf("selected %q, want n7 (the highest position scores most)", d.Selected)
	}
	if p.calls["filter"] != 7 || p.calls["score"] != 7 {
		t.Fatalf("calls %v, want 7 filters and 7 scores", p.calls)
	}
	for _, r := range d.Nodes {
		if r.Scores != nil {
			t.Fatalf("Schedule kept plugin scores for %s: %v", r.Node, r.Scores)
		}
	}
	diag := fw.Diagnose(context.Background(), f, snap, makePod("p").Obj())
	if r, _ := diag.Node("n5"); len(r.Scores) != 1 || r.Scores[0].Score != 5 {
		t.Fatalf("Diagnose's scores of n5: %+v", r.Scores)
	}
}

func TestWorkers(t *testing.T) {
	auto := newFramework(t, []fw.Plugin{rejectNodes("R", fw.Unschedulable, "no")}, fw.Options{})
	for n, want := range map[int]int{0: 1, 500: 1, fw.NodesPerWorker - 1: 1, 2 * fw.NodesPerWorker: min(2, runtime.GOMAXPROCS(0)),
		100 * fw.NodesPerWorker: runtime.GOMAXPROCS(0)} {
		if got := auto.Workers(n); got != want {
			t.Errorf("Parallelism 0, %d nodes: %d goroutines, want %d", n, got, want)
		}
	}
	fixed := newFramework(t, []fw.Plugin{rejectNodes("R", fw.Unschedulable, "no")}, fw.Options{Parallelism: 3})
	if got := fixed.Workers(10); got != 3 {
		t.Errorf("Parallelism 3, 10 nodes: %d goroutines, want 3", got)
	}
}
