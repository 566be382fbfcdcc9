package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// simFixture is a snapshot with GPU nodes and named claims, each claim
// asking for one instance matching its selector.
type simFixture struct{ snap *Snapshot }

func newSimFixture(nodes ...string) *simFixture {
	f := &simFixture{snap: &Snapshot{Classes: []*resourceapi.ResourceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "cls"}, DriverName: "gpu"}}}}
	for _, n := range nodes {
		f.snap.Nodes = append(f.snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		f.snap.Slices = append(f.snap.Slices, gpuSlice(n, 1))
	}
	return f
}

func gpuSlice(node string, n int) *resourceapi.NodeResourceSlice {
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		p.ResourceInstances = append(p.ResourceInstances, gpuInstance(fmt.Sprintf("gpu-%d", i)))
	}
	return makeSlice(node, "gpu", p)
}

// claim adds a claim with its own parameters and returns its name.
func (f *simFixture) claim(name, selector string, mutate ...func(*resourceapi.ResourceClaim, *resourceapi.ResourceClaimParameters)) string {
	c := makeClaim(name, "gpu", selector)
	c.Claim.Spec.ParametersRef = &resourceapi.ResourceClaimParametersReference{
		APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: name}
	for _, m := range mutate {
		m(c.Claim, c.ClaimParameters)
	}
	f.snap.Claims = append(f.snap.Claims, c.Claim)
	f.snap.ClaimParameters = append(f.snap.ClaimParameters, c.ClaimParameters)
	return name
}

func shareable(_ *resourceapi.ResourceClaim, p *resourceapi.ResourceClaimParameters) {
	p.Shareable = true
}

func immediate(c *resourceapi.ResourceClaim, _ *resourceapi.ResourceClaimParameters) {
	c.Spec.AllocationMode = resourceapi.AllocationModeImmediate
}

func podUsing(name string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for i, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprint("c", i), ResourceClaimName: ptr(c)})
	}
	return p
}

func capacityOfNode(t *testing.T, s *Simulation, node string) int {
	t.Helper()
	_, st, ok := s.Node(node)
	if !ok {
		t.Fatalf("node %s missing", node)
	}
	return st.Capacity()
}

func TestSimulationBindEvict(t *testing.T) {
	ctx := context.Background()
	f := newSimFixture("n1")
	f.claim("shared", selQuarter, shareable)
	f.claim("mine", selHalf)
	f.claim("imm", selQuarter, immediate)
	sim := NewSimulation(f.snap, Options{})
	a, b := podUsing("a", "shared", "imm"), podUsing("b", "shared")

	if _, err := sim.BindPod(ctx, a, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.BindPod(ctx, b, "n1"); err != nil {
		t.Fatal(err)
	}
	shared, _ := sim.Claim("default", "shared")
	if len(shared.Status.ReservedFor) != 2 || len(shared.Status.Allocation.ResourceHandles) != 1 {
		t.Fatalf("shared claim: %+v", shared.Status)
	}
	if !slices.Contains(shared.Finalizers, resourceapi.DeleteProtectionFinalizer) || shared.Status.DriverName != "gpu" {
		t.Errorf("shared claim lacks finalizer or driver name: %+v", shared)
	}
	// Two quarters are in use: the half does not fit.
	if res, err := sim.BindPod(ctx, podUsing("c", "mine"), "n1"); !errors.Is(err, ErrDoesNotFit) || res.Fits {
		t.Fatalf("half bound next to quarters: %v", err)
	}
	var rerr *ReasonError
	if _, err := sim.BindPod(ctx, podUsing("c", "mine"), "n1"); !errors.As(err, &rerr) || rerr.Reasons[0].Code != ReasonInUse {
		t.Fatalf("want a ReasonError with %s, got %v", ReasonInUse, err)
	}
	if err := sim.RemoveNode("n1"); !errors.Is(err, ErrNodeInUse) {
		t.Fatalf("RemoveNode with pods: %v", err)
	}

	if err := sim.EvictPod(a, "n1"); err != nil {
		t.Fatal(err)
	}
	if c, _ := sim.Claim("default", "shared"); c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 {
		t.Errorf("shared claim deallocated while b uses it: %+v", c.Status)
	}
	if c, _ := sim.Claim("default", "imm"); c.Status.Allocation == nil || len(c.Status.ReservedFor) != 0 {
		t.Errorf("immediate claim: %+v", c.Status)
	}
	if err := sim.EvictPod(b, "n1"); err != nil {
		t.Fatal(err)
	}
	if c, _ := sim.Claim("default", "shared"); c.Status.Allocation != nil || slices.Contains(c.Finalizers, resourceapi.DeleteProtectionFinalizer) {
		t.Errorf("unused claim not deallocated: %+v", c)
	}
	if got := capacityOfNode(t, sim, "n1"); got != 3 {
		t.Errorf("capacity %d with the immediate claim's quarter still allocated, want 3", got)
	}
	if err := sim.RemoveNode("n1"); err != nil {
		t.Errorf("RemoveNode after evictions: %v", err)
	}
	if err := sim.RemoveNode("n1"); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("RemoveNode twice: %v", err)
	}
}

func TestSimulationCloneIsIndependent(t *testing.T) {
	ctx := context.Background()
	f := newSimFixture("n1", "n2")
	f.claim("q", selQuarter)
	sim := NewSimulation(f.snap, Options{})
	clone := sim.Clone()
	if _, err := clone.BindPod(ctx, podUsing("p", "q"), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := clone.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}}, []*resourceapi.NodeResourceSlice{gpuSlice("n3", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := clone.RemoveNode("n2"); err != nil {
		t.Fatal(err)
	}
	if c, _ := sim.Claim("default", "q"); c.Status.Allocation != nil {
		t.Error("binding in the clone allocated the original's claim")
	}
	if got := sim.Nodes(); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("original nodes %v", got)
	}
	if got := clone.Nodes(); !slices.Equal(got, []string{"n1", "n3"}) {
		t.Errorf("clone nodes %v", got)
	}
	if capacityOfNode(t, sim, "n1") != 4 || capacityOfNode(t, clone, "n1") != 3 {
		t.Error("node state shared between clone and original")
	}
	// Mutating the original after cloning does not leak into the clone.
	if _, err := sim.BindPod(ctx, podUsing("p", "q"), "n2"); err != nil {
		t.Fatal(err)
	}
	if c, _ := clone.Claim("default", "q"); AllocatedNodes(c)[0] != "n1" {
		t.Errorf("clone sees the original's allocation: %v", AllocatedNodes(c))
	}
	if err := clone.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, nil); !errors.Is(err, ErrNodeExists) {
		t.Errorf("AddNode of an existing name: %v", err)
	}
}

func TestSimulationFilter(t *testing.T) {
	ctx := context.Background()
	f := newSimFixture("n1")
	f.claim("q", selQuarter)
	f.claim("params-missing", selQuarter)
	f.snap.ClaimParameters = f.snap.ClaimParameters[:1]
	sim := NewSimulation(f.snap, Options{NodeFilter: func(pod *corev1.Pod, node *corev1.Node) []Reason {
		if pod.Name == "blocked" {
			return []Reason{{Code: ReasonNodeSelectorMismatch, Message: "blocked"}}
		}
		return nil
	}})
	tests := map[string]struct {
		pod  *corev1.Pod
		node string
		want ReasonCode
	}{
		"fits":             {podUsing("p", "q"), "n1", ""},
		"node filter":      {podUsing("blocked", "q"), "n1", ReasonNodeSelectorMismatch},
		"unknown node":     {podUsing("p", "q"), "nope", ReasonNodeNotFound},
		"missing claim":    {podUsing("p", "nope"), "n1", ReasonClaimNotFound},
		"missing params":   {podUsing("p", "params-missing"), "n1", ReasonParametersNotFound},
		"no claims at all": {podUsing("p"), "n1", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := sim.Filter(ctx, tc.pod, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			var got ReasonCode
			if len(res.Reasons) > 0 {
				got = res.Reasons[0].Code
			}
			if got != tc.want || res.Fits != (tc.want == "") {
				t.Errorf("fits=%v reasons=%v, want %q", res.Fits, res.Reasons, tc.want)
			}
		})
	}
	if c, _ := sim.Claim("default", "q"); c.Status.Allocation != nil {
		t.Error("Filter allocated a claim")
	}
}

// TestDeadline: a search cut short by its context reports ErrDeadline,
// never "does not fit". Two kinds of request, so that the search runs (one
// kind on a node without partitions needs none).
func TestDeadline(t *testing.T) {
	const checkEvery = 64 // the search looks at its context every 64 steps
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := NewNodeState(wholeNode("n", 2*checkEvery), nil, nil)
	sels := make([]string, 2*checkEvery)
	for i := range sels {
		sels[i] = []string{selWhole, selHalf}[i%2]
	}
	res, err := Allocate(ctx, Prepare(nil, []Claim{makeClaim("c", "gpu", sels...)}), st)
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Allocate with a cancelled context: %v, %v", res, err)
	}
}

// TestConcurrentAllocate shares one Model, NodeState and Request between
// goroutines, as a scheduler filtering nodes in parallel does; run with
// -race.
func TestConcurrentAllocate(t *testing.T) {
	st := NewNodeState(gpuNode("n", 4), nil, nil)
	req := Prepare(nil, []Claim{makeClaim("a", "gpu", selHalf, selQuarter), makeClaim("b", "gpu", `quantities["memory"] >= "12Gi"`)})
	want, err := Allocate(context.Background(), req, st)
	if err != nil || !want.Fits {
		t.Fatalf("%v %v", want, err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			got, err := Allocate(context.Background(), req, st)
			switch {
			case err != nil:
				errs <- err
			case got.Score != want.Score || got.Allocations[0].ResourceHandles[0].StructuredData.Partitionable.Instances[0] !=
				want.Allocations[0].ResourceHandles[0].StructuredData.Partitionable.Instances[0]:
				errs <- fmt.Errorf("nondeterministic result %+v", got)
			default:
				errs <- nil
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestNothingFitsIsFast: infeasible requests on many identical GPUs are
// decided quickly, by the counting bound or by symmetry and the memo.
func TestNothingFitsIsFast(t *testing.T) {
	repeat := func(n int, sel string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = sel
		}
		return out
	}
	tests := map[string]struct {
		model *Model
		sels  []string
	}{
		// Caught by the counting bound.
		"65 whole GPUs on 64": {wholeNode("n", 64), repeat(65, selWhole)},
		// Passes every counting bound (10 <= 16 whole, 13 <= 32 halves,
		// 23 <= 32 together) but 10 whole GPUs leave 12 halves.
		"10 whole and 13 halves on 16": {gpuNode("n", 16), append(repeat(10, selWhole), repeat(13, `quantities["memory"] == quantity("16Gi")`)...)},
		"5 halves and 9 quarters on 4": {gpuNode("n", 4), append(repeat(5, `quantities["memory"] == quantity("16Gi")`), repeat(9, `quantities["memory"] == quantity("8Gi")`)...)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			res, err := Allocate(ctx, Prepare(nil, []Claim{makeClaim("c", "gpu", tc.sels...)}), NewNodeState(tc.model, nil, nil))
			if err != nil || res.Fits {
				t.Fatalf("fits=%v err=%v", res != nil && res.Fits, err)
			}
			// The 10s context bounds the search: blowing up would end in
			// ErrDeadline and fail above; speed is checked by benchmarks.
			t.Logf("%v: %s", time.Since(start), res.Reasons[0].Message)
		})
	}
}
