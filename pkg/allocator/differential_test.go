package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The differential test compares the allocator with a brute-force
// enumerator on random small nodes and pods: they must agree on whether the
// pod fits, and every allocation the allocator returns must be valid when
// checked from the IDs alone (no instance twice, at most one partition
// group in use per instance, selectors true, instances healthy).

var diffSelectors = []string{
	`quantities["memory"] >= "8Gi"`,
	`quantities["memory"] >= "16Gi"`,
	`quantities["memory"] == quantity("8Gi")`,
	`quantities["memory"] <= "16Gi" && strings["kind"] == "a"`,
	`strings["kind"] == "b" || quantities["memory"] >= "32Gi"`,
	`strings["kind"] == "a"`,
	`ints["missing"] > 0`,
	`true`,
	`true`,
	`quantities["memory"] >= "8Gi"`,
}

var diffMemory = []string{"8Gi", "16Gi", "32Gi"}

// randomInstance builds a random partition tree below a name.
func randomInstance(rng *rand.Rand, name string, depth int) resourceapi.ResourceInstance {
	in := resourceapi.ResourceInstance{Name: name}
	in.Attributes = []resourceapi.Attribute{
		{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: ptr(resource.MustParse(diffMemory[rng.IntN(3)]))}},
	}
	if rng.IntN(3) == 0 {
		in.CommonAttributesRefs = []string{[]string{"kind-a", "kind-b"}[rng.IntN(2)]}
	}
	if rng.IntN(12) == 0 {
		in.Health = resourceapi.InstanceUnhealthy
	}
	if depth >= 3 || rng.IntN(2) == 0 {
		return in
	}
	for g := range 1 + rng.IntN(3) {
		group := resourceapi.ResourceInstanceGroup{Name: fmt.Sprintf("g%d", g)}
		for c := range 1 + rng.IntN(2+g) {
			group.ResourceInstances = append(group.ResourceInstances, randomInstance(rng, fmt.Sprintf("i%d", c), depth+1))
		}
		in.Partitions = append(in.Partitions, group)
	}
	return in
}

func randomSlice(rng *rand.Rand) *resourceapi.NodeResourceSlice {
	p := &resourceapi.PartitionableResources{CommonAttributes: []resourceapi.AttributeGroup{
		{Name: "kind-a", Attributes: []resourceapi.Attribute{{Name: "kind", AttributeValue: resourceapi.AttributeValue{String: ptr("a")}}}},
		{Name: "kind-b", Attributes: []resourceapi.Attribute{{Name: "kind", AttributeValue: resourceapi.AttributeValue{String: ptr("b")}}}},
	}}
	for r := range 1 + rng.IntN(3) {
		root := randomInstance(rng, fmt.Sprintf("dev-%d", r), 0)
		p.ResourceInstances = append(p.ResourceInstances, root)
		if rng.IntN(2) == 0 { // identical copies exercise the symmetry pruning
			dup := *root.DeepCopy()
			dup.Name = fmt.Sprintf("dev-%d-copy", r)
			p.ResourceInstances = append(p.ResourceInstances, dup)
		}
	}
	return makeSlice("node", "drv", p)
}

// idLocks checks a set of allocated IDs from the IDs alone: no duplicates
// and at most one group in use below every instance prefix.
func idLocks(ids []string) error {
	seen := map[string]bool{}
	groupOf := map[string]string{}
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("instance %s allocated twice", id)
		}
		seen[id] = true
		comps := strings.Split(id, "/")
		for i := 1; i < len(comps); i += 2 {
			inst := strings.Join(comps[:i], "/")
			if g, ok := groupOf[inst]; ok && g != comps[i] {
				return fmt.Errorf("instance %s used through groups %s and %s", inst, g, comps[i])
			}
			groupOf[inst] = comps[i]
		}
	}
	// An allocated instance must not also be the ancestor of another.
	for _, id := range ids {
		if _, ok := groupOf[id]; ok {
			return fmt.Errorf("instance %s allocated and partitioned", id)
		}
	}
	return nil
}

// bruteForce enumerates every injective assignment of items to usable
// leaves matching them and reports whether one is valid.
func bruteForce(dm *driverModel, existing []string, matches [][]bool) bool {
	used := map[string]bool{}
	for _, id := range existing {
		used[id] = true
	}
	chosen := make([]string, 0, len(matches))
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(matches) {
			return idLocks(append(slices.Clone(existing), chosen...)) == nil
		}
		for l, x := range dm.leaves {
			id := dm.insts[x].id
			if !matches[i][l] || !dm.insts[x].ok || used[id] || slices.Contains(chosen, id) {
				continue
			}
			chosen = append(chosen, id)
			if rec(i + 1) {
				return true
			}
			chosen = chosen[:len(chosen)-1]
		}
		return false
	}
	return rec(0)
}

// diffCase is one random node and pod of the differential tests: a
// node's slice, the instances allocated before, and one or two claims of
// the selectors in diffSelectors.
type diffCase struct {
	model    *Model
	dm       *driverModel
	existing []string
	st       *NodeState
	claims   []Claim
}

// randomDiffCase makes the case of seed; ok is false when the node has no
// driver, or more than maxLeaves leaves (0: any number).
func randomDiffCase(seed uint64, maxLeaves int) (c diffCase, ok bool) {
	rng := rand.New(rand.NewPCG(seed, 42))
	c.model = NewModel("node", []*resourceapi.NodeResourceSlice{randomSlice(rng)})
	c.dm = c.model.drivers["drv"]
	if c.dm == nil || (maxLeaves > 0 && len(c.dm.leaves) > maxLeaves) {
		return c, false
	}
	c.existing = randomExisting(rng, c.dm)
	c.st = NewNodeState(c.model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "node", "drv", c.existing...)})
	var sels []string
	for range 1 + rng.IntN(5) {
		sels = append(sels, diffSelectors[rng.IntN(len(diffSelectors))])
	}
	c.claims = []Claim{makeClaim("c0", "drv", sels[:1+rng.IntN(len(sels))]...)}
	if n := len(c.claims[0].ClaimParameters.Requests[0].Partitionable.Required); n < len(sels) {
		c.claims = append(c.claims, makeClaim("c1", "drv", sels[n:]...))
	}
	return c, true
}

func TestDifferential(t *testing.T) {
	const cases = 2500
	fits, tried := 0, 0
	for seed := range uint64(cases) {
		c, ok := randomDiffCase(seed, 16)
		if !ok {
			continue
		}
		tried++
		model, dm, existing, st := c.model, c.dm, c.existing, c.st
		req := Prepare(nil, c.claims)
		res, err := Allocate(context.Background(), req, st)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var matches [][]bool
		for _, it := range req.items["drv"] {
			outs := req.kinds["drv"][it.kind].outcomes(dm)
			m := make([]bool, len(outs))
			for i, o := range outs {
				m[i] = o == outcomeTrue
			}
			matches = append(matches, m)
		}
		want := bruteForce(dm, existing, matches)
		if res.Fits != want {
			t.Fatalf("seed %d: allocator fits=%v, brute force %v; reasons %v", seed, res.Fits, want, res.Reasons)
		}
		if !res.Fits {
			if len(res.Reasons) == 0 {
				t.Fatalf("seed %d: rejection without reasons", seed)
			}
			continue
		}
		fits++
		checkAllocation(t, seed, dm, req, res, existing)
		checkCapacity(t, seed, model, st, res)
	}
	t.Logf("%d cases, %d fit", tried, fits)
	if fits < tried/5 || tried-fits < tried/5 {
		t.Errorf("unbalanced cases: %d of %d fit", fits, tried)
	}
}

func randomExisting(rng *rand.Rand, dm *driverModel) []string {
	var ids []string
	for range rng.IntN(3) {
		x := dm.leaves[rng.IntN(len(dm.leaves))]
		cand := append(slices.Clone(ids), dm.insts[x].id)
		if dm.insts[x].ok && idLocks(cand) == nil {
			ids = cand
		}
	}
	return ids
}

func checkAllocation(t *testing.T, seed uint64, dm *driverModel, req *Request, res *Result, existing []string) {
	t.Helper()
	all := slices.Clone(existing)
	for ci, a := range res.Allocations {
		var ids []string
		for _, h := range a.ResourceHandles {
			for _, in := range h.StructuredData.Partitionable.Instances {
				ids = append(ids, in.ID)
			}
		}
		var items []item
		for _, it := range req.items["drv"] {
			if it.claim == ci {
				items = append(items, it)
			}
		}
		if len(ids) != len(items) {
			t.Fatalf("seed %d: claim %d got %d instances for %d requests", seed, ci, len(ids), len(items))
		}
		for i, id := range ids {
			x, ok := dm.byID[id]
			if !ok || dm.insts[x].leaf < 0 || !dm.insts[x].ok {
				t.Fatalf("seed %d: %s is not an allocatable instance", seed, id)
			}
			if o := req.kinds["drv"][items[i].kind].sel.eval(dm.insts[x].vars); o != outcomeTrue {
				t.Fatalf("seed %d: %s does not satisfy %s", seed, id, req.kinds["drv"][items[i].kind].sel.src)
			}
		}
		all = append(all, ids...)
	}
	if err := idLocks(all); err != nil {
		t.Fatalf("seed %d: invalid allocation: %v", seed, err)
	}
}

// checkCapacity compares the search's incremental capacity with the plain
// recursive definition on the state after the allocation.
func checkCapacity(t *testing.T, seed uint64, model *Model, st *NodeState, res *Result) {
	t.Helper()
	var claims []*resourceapi.ResourceClaim
	for _, a := range res.Allocations {
		claims = append(claims, &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: a}})
	}
	after := st.WithAllocated(claims...)
	if got := after.Capacity(); got != res.CapacityAfter {
		t.Fatalf("seed %d: capacity after allocation %d, search says %d", seed, got, res.CapacityAfter)
	}
}

// pruningCase is the random node and claim of TestPruningKeepsAnswer's
// case seed: 2 to 6 devices of three shapes (a whole GPU and two random
// partition trees), some of them in use, and one claim of 2 to 7 items.
func pruningCase(seed uint64) (*Request, *NodeState) {
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
	return Prepare(nil, []Claim{makeClaim("c", "drv", sels...)}), st
}

// TestPruningKeepsAnswer runs the search with and without its pruning
// (symmetry, memo of failed states, counting bounds) on larger random
// nodes: the answers must be identical, down to the instances chosen.
func TestPruningKeepsAnswer(t *testing.T) {
	compared, fit := 0, 0
	for seed := range uint64(400) {
		req, st := pruningCase(seed)
		if len(req.reasons) > 0 {
			t.Fatalf("seed %d: %v", seed, req.reasons)
		}
		ok1, a1 := solveDirect(t, req, st, false)
		ok2, a2, timedOut := solveDirectExhaustive(req, st)
		if timedOut {
			continue
		}
		compared++
		if ok1 {
			fit++
		}
		if ok1 != ok2 || !slices.Equal(a1, a2) {
			t.Fatalf("seed %d: pruned search %v %v, exhaustive %v %v", seed, ok1, a1, ok2, a2)
		}
	}
	t.Logf("%d compared, %d fit", compared, fit)
	if compared < 200 {
		t.Errorf("only %d cases compared", compared)
	}
}

// searchDirect runs the one search on driver "drv" of req on st.
func searchDirect(ctx context.Context, req *Request, st *NodeState, exhaustive bool) (ok bool, assign []int32, lost int, f *failure, err error) {
	dm := st.model.drivers["drv"]
	kinds := make([]int, len(req.items["drv"]))
	for i, it := range req.items["drv"] {
		kinds[i] = it.kind
	}
	assign, lost, f, err = seedSearch(ctx, dm, st.stateOf("drv"), req.masks("drv", dm), kinds, len(req.kinds["drv"]), exhaustive)
	return err == nil && f == nil, assign, lost, f, err
}

func solveDirect(t *testing.T, req *Request, st *NodeState, exhaustive bool) (bool, []int32) {
	t.Helper()
	ok, assign, _, _, err := searchDirect(context.Background(), req, st, exhaustive)
	if err != nil {
		t.Fatal(err)
	}
	return ok, assign
}

func solveDirectExhaustive(req *Request, st *NodeState) (bool, []int32, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ok, assign, _, _, err := searchDirect(ctx, req, st, true)
	return ok, assign, err != nil
}

// TestFlatMatchesSearch: on nodes without partitions and pods whose
// requests are all of one kind, the shortcut that skips the search gives
// the search's answer, assignment, capacity and reasons.
func TestFlatMatchesSearch(t *testing.T) {
	shortcut := 0
	for seed := range uint64(600) {
		rng := rand.New(rand.NewPCG(seed, 11))
		p := &resourceapi.PartitionableResources{}
		for i := range 1 + rng.IntN(12) {
			in := randomInstance(rng, fmt.Sprintf("dev-%d", i), 0)
			in.Partitions = nil
			p.ResourceInstances = append(p.ResourceInstances, in)
		}
		model := NewModel("node", []*resourceapi.NodeResourceSlice{makeSlice("node", "drv", p)})
		dm := model.drivers["drv"]
		if dm == nil {
			continue
		}
		st := NewNodeState(model, nil, []*resourceapi.ResourceClaim{allocatedClaim("old", "node", "drv", randomExisting(rng, dm)...)})
		sel := diffSelectors[rng.IntN(len(diffSelectors))]
		sels := make([]string, 1+rng.IntN(6))
		for i := range sels {
			sels[i] = sel
		}
		req := Prepare(nil, []Claim{makeClaim("c", "drv", sels...)})
		ds, masks := st.stateOf("drv"), req.masks("drv", dm)
		assign, f, ok := req.flat("drv", dm, ds)
		if !ok {
			t.Fatalf("seed %d: shortcut refused a flat node with one kind", seed)
		}
		shortcut++
		fits, sAssign, lost, sf, err := searchDirect(context.Background(), req, st, false)
		if err != nil {
			t.Fatal(err)
		}
		if fits != (f == nil) {
			t.Fatalf("seed %d: shortcut fits=%v, search %v", seed, f == nil, fits)
		}
		if fits {
			if !slices.Equal(assign, sAssign) || lost != len(assign) {
				t.Fatalf("seed %d: shortcut %v, search %v (capacity lost %d)", seed, assign, sAssign, lost)
			}
			continue
		}
		got, want := req.explain("drv", dm, ds, masks, f), req.explain("drv", dm, ds, masks, sf)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d: shortcut reasons %v, search %v", seed, got, want)
		}
	}
	if shortcut < 500 {
		t.Errorf("only %d cases compared", shortcut)
	}
}
