package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// The seed front end of the one search (seedsearch.go) against the seed
// solver: on every seed case the tests can generate, both must give the
// same answer, leaves, reasons, capacities and allocations.

// sameAnswer checks req on st with both searches.
func sameAnswer(t *testing.T, name string, req *Request, st *NodeState) *Result {
	t.Helper()
	ctx := context.Background()
	old, err1 := check(ctx, req, st, false)
	one, err2 := check(ctx, req, st, true)
	if (err1 == nil) != (err2 == nil) {
		t.Fatalf("%s: solver error %v, one search %v", name, err1, err2)
	}
	if err1 != nil {
		return nil
	}
	if old.Fits != one.Fits || old.CapacityBefore != one.CapacityBefore || old.CapacityAfter != one.CapacityAfter || old.Score != one.Score {
		t.Fatalf("%s: solver fits=%v capacity %d->%d score %d; one search fits=%v capacity %d->%d score %d; reasons %v / %v",
			name, old.Fits, old.CapacityBefore, old.CapacityAfter, old.Score, one.Fits, one.CapacityBefore, one.CapacityAfter, one.Score,
			old.Reasons, one.Reasons)
	}
	if fmt.Sprint(old.Reasons) != fmt.Sprint(one.Reasons) || !reflect.DeepEqual(old.Reasons, one.Reasons) {
		t.Fatalf("%s: reasons differ:\nsolver:     %v\none search: %v", name, old.Reasons, one.Reasons)
	}
	if !reflect.DeepEqual(old.chosen, one.chosen) {
		t.Fatalf("%s: solver chose %v, one search %v", name, old.chosen, one.chosen)
	}
	if !reflect.DeepEqual(old.Build(), one.Build()) {
		t.Fatalf("%s: allocations differ", name)
	}
	return one
}

// TestOneSearchDifferential: TestDifferential's random nodes and pods.
func TestOneSearchDifferential(t *testing.T) {
	n := 0
	for seed := range uint64(2500) {
		rng := rand.New(rand.NewPCG(seed, 42))
		slice := randomSlice(rng)
		model := NewModel("node", []*resourceapi.NodeResourceSlice{slice})
		dm := model.drivers["drv"]
		if dm == nil {
			continue
		}
		existing := randomExisting(rng, dm)
		st := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "node", "drv", existing...)})
		var sels []string
		for range 1 + rng.IntN(5) {
			sels = append(sels, diffSelectors[rng.IntN(len(diffSelectors))])
		}
		claims := []Claim{makeClaim("c0", "drv", sels[:1+rng.IntN(len(sels))]...)}
		if k := len(claims[0].ClaimParameters.Requests[0].Partitionable.Required); k < len(sels) {
			claims = append(claims, makeClaim("c1", "drv", sels[k:]...))
		}
		sameAnswer(t, fmt.Sprintf("differential seed %d", seed), Prepare(nil, claims), st)
		n++
	}
	t.Logf("%d cases", n)
}

// TestOneSearchPruning: TestPruningKeepsAnswer's larger nodes.
func TestOneSearchPruning(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := &resourceapi.PartitionableResources{}
		shapes := []resourceapi.ResourceInstance{gpuInstance("x"), randomInstance(rng, "x", 1), randomInstance(rng, "x", 0)}
		for i := range 2 + rng.IntN(5) {
			in := *shapes[rng.IntN(len(shapes))].DeepCopy()
			in.Name = fmt.Sprintf("dev-%d", i)
			p.ResourceInstances = append(p.ResourceInstances, in)
		}
		model := NewModel("node", []*resourceapi.NodeResourceSlice{makeSlice("node", "drv", p)})
		dm := model.drivers["drv"]
		st := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "node", "drv", randomExisting(rng, dm)...)})
		var sels []string
		for range 2 + rng.IntN(6) {
			sels = append(sels, diffSelectors[rng.IntN(len(diffSelectors))])
		}
		sameAnswer(t, fmt.Sprintf("pruning seed %d", seed), Prepare(nil, []Claim{makeClaim("c", "drv", sels...)}), st)
	}
}

// TestOneSearchPacking: BenchmarkPacking's workloads, one pod at a time,
// so that the states of a filling node are compared too.
func TestOneSearchPacking(t *testing.T) {
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
				done.Status.Allocation = res.Build()[0]
				st = st.WithAllocated(done)
			}
		}
	}
}

// TestOneSearchNothingFits: TestNothingFitsIsFast's cases.
func TestOneSearchNothingFits(t *testing.T) {
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

// TestOneSearchFuzzInputs: FuzzModel's generator (odd names, stale
// allocated IDs that lock or use inner instances, malformed attributes)
// on random bytes, with several claims.
func TestOneSearchFuzzInputs(t *testing.T) {
	for seed := range uint64(4000) {
		rng := rand.New(rand.NewPCG(seed, 3))
		data := make([]byte, 10+rng.IntN(120))
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		r := &fuzzReader{data: data}
		p := &resourceapi.PartitionableResources{CommonAttributes: []resourceapi.AttributeGroup{{Name: "g", Attributes: []resourceapi.Attribute{r.attribute()}}}}
		for range 1 + r.next(4) {
			p.ResourceInstances = append(p.ResourceInstances, r.instance(0))
		}
		model := NewModel("n", []*resourceapi.NodeResourceSlice{makeSlice("n", "d", p)})
		var existing []string
		for range r.next(4) {
			id := fuzzNames[r.next(len(fuzzNames))]
			for range r.next(5) {
				id += "/" + fuzzNames[r.next(len(fuzzNames))]
			}
			existing = append(existing, id)
		}
		st := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "n", "d", existing...)})
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

// TestOneSearchMixed: larger nodes of mixed shapes (whole GPUs, the seed
// card, random trees, copies of each), several claims allocated before,
// and pods of up to 14 items of several kinds in up to three claims.
func TestOneSearchMixed(t *testing.T) {
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
