package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// The seed front end of the one search (seedsearch.go) on every seed
// case the tests can generate: the pruned search (counting bound,
// symmetry, subsets, forward checking) chooses exactly the leaves that a
// plain backtracking search in the same order chooses, and the capacity
// Check reports after the allocation is the node's capacity recomputed
// from scratch. (Until the seed solver was deleted, these cases also
// compared the one search with it: identical answers, reasons,
// capacities and allocations.)

// sameAnswer checks req on st: the pruned and the exhaustive search agree
// on every driver, and Check's capacities are right.
func sameAnswer(t *testing.T, name string, req *Request, st *NodeState) *Result {
	t.Helper()
	for _, d := range req.drivers {
		dm := st.model.drivers[d]
		if dm == nil {
			continue
		}
		kinds := make([]int, len(req.items[d]))
		for i, it := range req.items[d] {
			kinds[i] = it.kind
		}
		a1, l1, f1, err := seedSearch(context.Background(), dm, st.stateOf(d), req.masks(d, dm), kinds, len(req.kinds[d]), false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		a2, l2, f2, err := seedSearch(ctx, dm, st.stateOf(d), req.masks(d, dm), kinds, len(req.kinds[d]), true)
		cancel()
		if err != nil {
			continue // too long without pruning
		}
		if (f1 == nil) != (f2 == nil) || !slices.Equal(a1, a2) || l1 != l2 {
			t.Fatalf("%s: pruned search %v %v (lost %d), exhaustive %v %v (lost %d)", name, f1 == nil, a1, l1, f2 == nil, a2, l2)
		}
	}
	res, err := Allocate(context.Background(), req, st)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.Fits {
		var claims []*resourceapi.ResourceClaim
		for _, a := range res.Allocations {
			claims = append(claims, &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: a}})
		}
		if got := st.WithAllocated(claims...).Capacity(); got != res.CapacityAfter {
			t.Fatalf("%s: capacity after allocation %d, Check says %d", name, got, res.CapacityAfter)
		}
	} else if len(res.Reasons) == 0 {
		t.Fatalf("%s: rejection without reasons", name)
	}
	return res
}

// TestSeedSearchDifferential: TestDifferential's random nodes and pods.
func TestSeedSearchDifferential(t *testing.T) {
	n := 0
	for seed := range uint64(2500) {
		c, ok := randomDiffCase(seed, 0)
		if !ok {
			continue
		}
		sameAnswer(t, fmt.Sprintf("differential seed %d", seed), Prepare(nil, c.claims), c.st)
		n++
	}
	t.Logf("%d cases", n)
}

// TestSeedSearchPruning: TestPruningKeepsAnswer's larger nodes.
func TestSeedSearchPruning(t *testing.T) {
	for seed := range uint64(400) {
		req, st := pruningCase(seed)
		sameAnswer(t, fmt.Sprintf("pruning seed %d", seed), req, st)
	}
}

// TestSeedSearchPacking: BenchmarkPacking's workloads, one pod at a time,
// so that the states of a filling node are compared too.
func TestSeedSearchPacking(t *testing.T) {
	for name, model := range map[string]*Model{
		"listed-whole-first": gpuNode("node", 8),
		"listed-small-first": smallFirstNode("node", 8),
		"seed-card-shape":    seedCardNode("node", 8),
	} {
		st := NewNodeState(model, nil, nil)
		for i, c := range packingWorkload() {
			req := Prepare(nil, []Claim{c})
			res := sameAnswer(t, fmt.Sprintf("%s pod %d", name, i), req, st)
			if res.Fits {
				done := c.Claim.DeepCopy()
				done.Status.Allocation = res.Allocations[0]
				st = st.WithAllocated(done)
			}
		}
	}
}

// TestSeedSearchNothingFits: TestNothingFitsIsFast's cases.
func TestSeedSearchNothingFits(t *testing.T) {
	repeat := func(n int, sel string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = sel
		}
		return out
	}
	half, quarter := `quantities["memory"] == quantity("16Gi")`, `quantities["memory"] == quantity("8Gi")`
	for name, tc := range map[string]struct {
		model *Model
		sels  []string
	}{
		"65 whole GPUs on 64":          {wholeNode("n", 64), repeat(65, selWhole)},
		"10 whole and 13 halves on 16": {gpuNode("n", 16), append(repeat(10, selWhole), repeat(13, half)...)},
		"5 halves and 9 quarters on 4": {gpuNode("n", 4), append(repeat(5, half), repeat(9, quarter)...)},
		"10 whole and 12 halves on 16": {gpuNode("n", 16), append(repeat(10, selWhole), repeat(12, half)...)},
		"4 halves and 8 quarters on 4": {gpuNode("n", 4), append(repeat(4, half), repeat(8, quarter)...)},
		"40 whole on 64":               {wholeNode("n", 64), repeat(40, selWhole)},
	} {
		sameAnswer(t, name, Prepare(nil, []Claim{makeClaim("c", "gpu", tc.sels...)}), NewNodeState(tc.model, nil, nil))
	}
}

// TestSeedSearchFuzzInputs: FuzzModel's generator (odd names, stale
// allocated IDs that lock or use inner instances, malformed attributes)
// on random bytes, with several claims.
func TestSeedSearchFuzzInputs(t *testing.T) {
	for seed := range uint64(4000) {
		rng := rand.New(rand.NewPCG(seed, 3))
		data := make([]byte, 10+rng.IntN(120))
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		st, _ := (&fuzzReader{data: data}).node()
		var claims []Claim
		for c := range 1 + rng.IntN(3) {
			var sels []string
			for range 1 + rng.IntN(4) {
				sels = append(sels, diffSelectors[rng.IntN(len(diffSelectors))])
			}
			claims = append(claims, makeClaim(fmt.Sprintf("c%d", c), "d", sels...))
		}
		sameAnswer(t, fmt.Sprintf("fuzz inputs seed %d", seed), Prepare(nil, claims), st)
	}
}

// TestSeedSearchMixed: larger nodes of mixed shapes (whole GPUs, the seed
// card, random trees, copies of each), several claims allocated before,
// and pods of up to 14 items of several kinds in up to three claims.
func TestSeedSearchMixed(t *testing.T) {
	sels := append(slices.Clone(diffSelectors), selWhole, `quantities["memory"] == quantity("16Gi")`, `quantities["memory"] == quantity("8Gi")`)
	fits := 0
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 99))
		p := &resourceapi.PartitionableResources{CommonAttributes: []resourceapi.AttributeGroup{
			{Name: "kind-a", Attributes: []resourceapi.Attribute{stringAttr("kind", "a")}},
			{Name: "kind-b", Attributes: []resourceapi.Attribute{stringAttr("kind", "b")}},
		}}
		shapes := []resourceapi.ResourceInstance{gpuInstance("x"), randomInstance(rng, "x", 0), randomInstance(rng, "x", 1),
			seedCardInstance()}
		for i := range 1 + rng.IntN(8) {
			in := *shapes[rng.IntN(len(shapes))].DeepCopy()
			in.Name = fmt.Sprintf("dev-%d", i)
			p.ResourceInstances = append(p.ResourceInstances, in)
		}
		model := NewModel("node", []*resourceapi.NodeResourceSlice{makeSlice("node", "drv", p)})
		dm := model.drivers["drv"]
		var old []*resourceapi.ResourceClaim
		for c := range rng.IntN(4) {
			old = append(old, allocatedClaim(fmt.Sprintf("old-%d", c), "node", "drv", randomExisting(rng, dm)...))
		}
		st := NewNodeState(model, nil, old)
		var claims []Claim
		for c := range 1 + rng.IntN(3) {
			var ss []string
			for range 1 + rng.IntN(5) {
				ss = append(ss, sels[rng.IntN(len(sels))])
			}
			claims = append(claims, makeClaim(fmt.Sprintf("c%d", c), "drv", ss...))
		}
		if res := sameAnswer(t, fmt.Sprintf("mixed seed %d", seed), Prepare(nil, claims), st); res != nil && res.Fits {
			fits++
		}
	}
	t.Logf("3000 cases, %d fit", fits)
}

// seedCardInstance is seed 002's partitionable-gpu-1 (as seedCardNode's).
func seedCardInstance() resourceapi.ResourceInstance {
	leaf := func(name, mem string) resourceapi.ResourceInstance {
		return resourceapi.ResourceInstance{Name: name, Attributes: []resourceapi.Attribute{quantityAttr("memory", mem)}}
	}
	group := func(name string, in ...resourceapi.ResourceInstance) resourceapi.ResourceInstanceGroup {
		return resourceapi.ResourceInstanceGroup{Name: name, ResourceInstances: in}
	}
	return resourceapi.ResourceInstance{Name: "x", Partitions: []resourceapi.ResourceInstanceGroup{
		group("full-gpu", leaf("gpu", "32Gi")),
		group("quarters", leaf("quarter-0", "8Gi"), leaf("quarter-1", "8Gi"), leaf("quarter-2", "8Gi"), leaf("quarter-3", "8Gi")),
		group("half-and-quarters", leaf("first-half", "16Gi"), resourceapi.ResourceInstance{
			Name: "second-half", Partitions: []resourceapi.ResourceInstanceGroup{
				group("half", leaf("half", "16Gi")),
				group("quarters", leaf("quarter-0", "8Gi"), leaf("quarter-1", "8Gi")),
			}}),
	}}
}

// TestSeedSearchWideRoot: a root whose groups hold thousands of leaves
// (a slice may hold 4096 instances) is searched without conflict edges
// between every pair of its leaves: picks in one group exclude the other
// group's leaves by range.
func TestSeedSearchWideRoot(t *testing.T) {
	leaves := func(n int, mem string) []resourceapi.ResourceInstance {
		out := make([]resourceapi.ResourceInstance, n)
		for i := range out {
			out[i] = resourceapi.ResourceInstance{Name: fmt.Sprintf("l-%d", i), Attributes: []resourceapi.Attribute{quantityAttr("memory", mem)}}
		}
		return out
	}
	p := &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{{Name: "wide", Partitions: []resourceapi.ResourceInstanceGroup{
		{Name: "small", ResourceInstances: leaves(2000, "8Gi")},
		{Name: "big", ResourceInstances: leaves(2000, "16Gi")},
	}}}}
	model := NewModel("node", []*resourceapi.NodeResourceSlice{makeSlice("node", "drv", p)})
	st := NewNodeState(model, nil, nil)
	eight, sixteen := `quantities["memory"] == quantity("8Gi")`, `quantities["memory"] == quantity("16Gi")`
	res := sameAnswer(t, "one scheme", Prepare(nil, []Claim{makeClaim("c", "drv", eight, `true`, eight)}), st)
	if !res.Fits || res.CapacityAfter != 1997 {
		t.Fatalf("one scheme: fits=%v capacity %d -> %d, reasons %v", res.Fits, res.CapacityBefore, res.CapacityAfter, res.Reasons)
	}
	res = sameAnswer(t, "both schemes", Prepare(nil, []Claim{makeClaim("c", "drv", eight, sixteen)}), st)
	if res.Fits || len(res.Reasons) == 0 || res.Reasons[0].Code != ReasonNoCombination {
		t.Fatalf("both schemes: fits=%v, reasons %v", res.Fits, res.Reasons)
	}
}
