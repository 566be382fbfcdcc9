package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	selWhole   = `quantities["memory"] >= "32Gi"`
	selHalf    = `quantities["memory"] >= "16Gi"`
	selQuarter = `quantities["memory"] >= "8Gi"`
)

func benchAllocate(b *testing.B, st *NodeState, claims []Claim, wantFit bool) {
	b.Helper()
	ctx := context.Background()
	req := Prepare(nil, claims)
	b.ReportAllocs()
	for b.Loop() {
		res, err := Allocate(ctx, req, st)
		if err != nil || res.Fits != wantFit {
			b.Fatalf("fits=%v err=%v reasons=%v", res.Fits, err, res.Reasons)
		}
	}
}

// BenchmarkOneInstance: one claim for one instance on a node of 10
// instances (target: 20µs). "cold" recompiles nothing but evaluates every
// selector afresh (empty match cache), as for a pod with new parameters.
func BenchmarkOneInstance(b *testing.B) {
	st := NewNodeState(wholeNode("node", 10), nil, nil)
	claims := []Claim{makeClaim("c", "gpu", selQuarter)}
	b.Run("warm", func(b *testing.B) { benchAllocate(b, st, claims, true) })
	b.Run("cold", func(b *testing.B) {
		ctx := context.Background()
		req := Prepare(nil, claims)
		b.ReportAllocs()
		for b.Loop() {
			st.model.drivers["gpu"].matches.reset()
			if res, err := Allocate(ctx, req, st); err != nil || !res.Fits {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTwoClaimsEightGPUs: a pod with two claims of four instances each
// on a node of eight GPUs with whole/halves/quarters schemes (target:
// 200µs).
func BenchmarkTwoClaimsEightGPUs(b *testing.B) {
	st := NewNodeState(gpuNode("node", 8), nil, nil)
	claims := []Claim{
		makeClaim("a", "gpu", selHalf, selHalf, selHalf, selHalf),
		makeClaim("b", "gpu", selQuarter, selQuarter, selQuarter, selQuarter),
	}
	benchAllocate(b, st, claims, true)
}

// BenchmarkProveNotFit: 33 instances cannot fit a node of 32 (target: 1ms).
func BenchmarkProveNotFit(b *testing.B) {
	st := NewNodeState(wholeNode("node", 32), nil, nil)
	sels := make([]string, 33)
	for i := range sels {
		sels[i] = selWhole
	}
	benchAllocate(b, st, []Claim{makeClaim("c", "gpu", sels...)}, false)
}

// packingWorkload is a fixed mix of pods: each asks for one whole GPU, one
// half or one quarter, in a shuffled order, and the selectors ask for "at
// least" so that a whole GPU also satisfies a quarter request.
func packingWorkload() []Claim {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []Claim
	for i := range 48 {
		sel := selQuarter
		switch r := rng.IntN(10); {
		case r < 2:
			sel = selWhole
		case r < 5:
			sel = selHalf
		}
		out = append(out, makeClaim(fmt.Sprintf("c%d", i), "gpu", sel))
	}
	return out
}

// firstFit is seed 002's baseline: each request takes the first free
// matching instance in depth-first listing order.
func firstFit(st *NodeState, c Claim) (*resourceapi.ResourceClaim, bool) {
	dm := st.model.drivers["gpu"]
	req := Prepare(nil, []Claim{c})
	var ids []string
	cur := st
	for _, it := range req.items["gpu"] {
		outs := req.kinds["gpu"][it.kind].outcomes(dm)
		found := false
		for l, x := range dm.leaves {
			if outs[l] == outcomeTrue && dm.free(cur.stateOf("gpu"), x) {
				ids = append(ids, dm.insts[x].id)
				cur = st.WithAllocated(allocatedClaim("tmp", st.model.node, "gpu", ids...))
				found = true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return allocatedClaim(c.Claim.Name, st.model.node, "gpu", ids...), true
}

// smallFirstNode lists each GPU's quarters first, then halves, then the
// whole GPU: the order seed 002 recommends to drivers for first fit.
func smallFirstNode(node string, n int) *Model {
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		in := gpuInstance(fmt.Sprintf("gpu-%d", i))
		slices.Reverse(in.Partitions)
		p.ResourceInstances = append(p.ResourceInstances, in)
	}
	return NewModel(node, []*resourceapi.NodeResourceSlice{makeSlice(node, "gpu", p)})
}

// seedCardNode has n GPUs shaped like seed 002's partitionable-gpu-1:
// whole, four quarters, or a half plus a second half that is itself whole
// or two quarters, listed in the seed's order.
func seedCardNode(node string, n int) *Model {
	leaf := func(name, mem string) resourceapi.ResourceInstance {
		return resourceapi.ResourceInstance{Name: name, Attributes: []resourceapi.Attribute{quantityAttr("memory", mem)}}
	}
	group := func(name string, in ...resourceapi.ResourceInstance) resourceapi.ResourceInstanceGroup {
		return resourceapi.ResourceInstanceGroup{Name: name, ResourceInstances: in}
	}
	p := &resourceapi.PartitionableResources{}
	for i := range n {
		p.ResourceInstances = append(p.ResourceInstances, resourceapi.ResourceInstance{
			Name: fmt.Sprintf("gpu-%d", i),
			Partitions: []resourceapi.ResourceInstanceGroup{
				group("full-gpu", leaf("gpu", "32Gi")),
				group("quarters", leaf("quarter-0", "8Gi"), leaf("quarter-1", "8Gi"), leaf("quarter-2", "8Gi"), leaf("quarter-3", "8Gi")),
				group("half-and-quarters", leaf("first-half", "16Gi"), resourceapi.ResourceInstance{
					Name: "second-half", Partitions: []resourceapi.ResourceInstanceGroup{
						group("half", leaf("half", "16Gi")),
						group("quarters", leaf("quarter-0", "8Gi"), leaf("quarter-1", "8Gi")),
					}}),
			},
		})
	}
	return NewModel(node, []*resourceapi.NodeResourceSlice{makeSlice(node, "gpu", p)})
}

// packCount places the workload one pod at a time with allot's search and
// with first fit on a node of eight GPUs, and returns how many pods each
// placed.
func packCount(b *testing.B, model *Model) (allot, ff int) {
	b.Helper()
	ctx := context.Background()
	stA, stF := NewNodeState(model, nil, nil), NewNodeState(model, nil, nil)
	for _, c := range packingWorkload() {
		res, err := Allocate(ctx, Prepare(nil, []Claim{c}), stA)
		if err != nil {
			b.Fatal(err)
		}
		if res.Fits {
			allot++
			done := c.Claim.DeepCopy()
			done.Status.Allocation = res.Allocations[0]
			stA = stA.WithAllocated(done)
		}
		if claim, ok := firstFit(stF, c); ok {
			ff++
			stF = stF.WithAllocated(claim)
		}
	}
	return allot, ff
}

// BenchmarkPacking compares how many pods of a fixed mixed workload fit on
// a node of eight GPUs with allot's search and with first fit.
// The GPUs list their schemes whole first ("listed-whole-first"), quarters
// first ("listed-small-first"), or have seed 002's card shape with nested
// partitions; allot does not depend on the listing order, first fit does.
func BenchmarkPacking(b *testing.B) {
	for _, tc := range []struct {
		name  string
		model *Model
	}{
		{"listed-whole-first", gpuNode("node", 8)},
		{"listed-small-first", smallFirstNode("node", 8)},
		{"seed-card-shape", seedCardNode("node", 8)},
	} {
		model := tc.model
		b.Run(tc.name, func(b *testing.B) {
			var allot, ff int
			for b.Loop() {
				allot, ff = packCount(b, model)
			}
			b.ReportMetric(float64(allot), "pods-allot")
			b.ReportMetric(float64(ff), "pods-firstfit")
		})
	}
}

// BenchmarkSimulationClone measures Clone of a simulation of 1000 nodes
// with 4000 allocated claims, and a clone followed by binding one pod.
func BenchmarkSimulationClone(b *testing.B) {
	snap := &Snapshot{Classes: []*resourceapi.ResourceClass{{ObjectMeta: metav1.ObjectMeta{Name: "cls"}, DriverName: "gpu"}}}
	for n := range 1000 {
		name := fmt.Sprintf("node-%04d", n)
		snap.Nodes = append(snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		p := &resourceapi.PartitionableResources{}
		for g := range 4 {
			p.ResourceInstances = append(p.ResourceInstances, gpuInstance(fmt.Sprintf("gpu-%d", g)))
		}
		snap.Slices = append(snap.Slices, makeSlice(name, "gpu", p))
		for g := range 4 {
			snap.Claims = append(snap.Claims, allocatedClaim(fmt.Sprintf("%s-c%d", name, g), name, "gpu", fmt.Sprintf("gpu-%d/quarter/quarter-0", g)))
		}
	}
	sim := NewSimulation(snap, Options{})
	b.Run("clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = sim.Clone()
		}
	})
	params := makeClaim("new", "gpu", selQuarter)
	snap.ClaimParameters = append(snap.ClaimParameters, params.ClaimParameters)
	sim = NewSimulation(snap, Options{})
	claim := params.Claim.DeepCopy()
	claim.Spec.ParametersRef = &resourceapi.ResourceClaimParametersReference{Kind: "ResourceClaimParameters", Name: "new"}
	if err := sim.AddClaim(claim); err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("new")}}}}
	b.Run("clone+bind", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := sim.Clone()
			if _, err := c.BindPod(context.Background(), pod, "node-0500"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func (c *memo[V]) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
