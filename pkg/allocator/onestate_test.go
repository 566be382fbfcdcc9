package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
)

// TestSeedNodeStateMatchesClaims: the seed view of one node of the one
// device-use state (State.SeedNodeState) marks the same instances in
// use and the same partition groups locked as a NodeState counting the
// v1alpha2 claims and the v1 claims' seed devices
// (seedAllocations), on random partition trees, with claims
// of both versions, IDs the model knows only in part, claims of another
// node, and states derived by WithChanges.
func TestSeedNodeStateMatchesClaims(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 27))
		sl := randomSlice(rng)
		model := NewModel("node", []*resourceapi.NodeResourceSlice{sl})
		other := *sl.DeepCopy()
		other.Name, other.Spec.NodeName = "other", "other"
		inv := NewInventory(nil, []*resourceapi.NodeResourceSlice{sl, &other})
		dm := model.drivers["drv"]
		var seedClaims []*resourceapi.ResourceClaim
		var v1Claims []*resourcev1.ResourceClaim
		for i := range 1 + rng.IntN(4) {
			name := fmt.Sprintf("c%d", i)
			ids := randomExisting(rng, dm)
			if rng.IntN(4) == 0 && len(dm.insts) > 0 { // not a leaf: a whole instance, or a name the model does not know
				ids = append(ids, dm.insts[rng.IntN(len(dm.insts))].id, "dev-0/gone/x")
			}
			node := "node"
			if rng.IntN(5) == 0 {
				node = "other"
			}
			if rng.IntN(2) == 0 {
				seedClaims = append(seedClaims, allocatedClaim(name, node, "drv", ids...))
				continue
			}
			var devs []string
			for _, id := range ids {
				devs = append(devs, "drv/"+node+"/"+SeedDeviceName(id))
			}
			v1Claims = append(v1Claims, v1tAllocated(name, node, devs...))
		}
		want := NewNodeState(model, nil, append(seedClaims, seedAllocations(inv, v1Claims...)...))
		st := NewState(inv, v1Claims, seedClaims)
		compareSeedUse(t, seed, model, want, st.SeedNodeState(model, nil, nil))

		// The same, derived: everything added, then half of it removed
		// and added again.
		d := NewState(inv, nil, nil).WithChanges(nil, v1Claims, nil, seedClaims)
		d = d.WithChanges(v1Claims[:len(v1Claims)/2], nil, seedClaims[:len(seedClaims)/2], nil).
			WithChanges(nil, v1Claims[:len(v1Claims)/2], nil, seedClaims[:len(seedClaims)/2])
		compareSeedUse(t, seed, model, want, d.SeedNodeState(model, nil, nil))
	}
}

func compareSeedUse(t *testing.T, seed uint64, model *Model, want, got *NodeState) {
	t.Helper()
	for name, dm := range model.drivers {
		w, g := want.stateOf(name), got.stateOf(name)
		for x := range dm.insts {
			if a, b := w != nil && w.used[x] > 0, g != nil && g.used[x] > 0; a != b {
				t.Fatalf("seed %d: instance %s in use %v from the claims, %v from the one state", seed, dm.insts[x].id, a, b)
			}
		}
		for x := range dm.groups {
			if a, b := w != nil && w.lock[x] > 0, g != nil && g.lock[x] > 0; a != b {
				t.Fatalf("seed %d: group %s locked %v from the claims, %v from the one state", seed, dm.groups[x].id, a, b)
			}
		}
	}
}

// TestSeedNodeStateKeepsIdentity: a node's seed view is the same object
// while the node's instances in use in the one state are unchanged, in
// derived states and in states built afresh (the scheduler's caches key
// a node's base state by identity), and a new one once they change.
func TestSeedNodeStateKeepsIdentity(t *testing.T) {
	a, b := v1tSeedNode("node-a", 4), v1tSeedNode("node-b", 4)
	inv := NewInventory(nil, []*resourceapi.NodeResourceSlice{a, b})
	modelA := NewModel("node-a", []*resourceapi.NodeResourceSlice{a})
	node := v1tNode("node-a")
	onA := allocatedClaim("on-a", "node-a", a.Spec.DriverName, modelA.drivers[a.Spec.DriverName].insts[0].id)
	st := NewState(inv, nil, []*resourceapi.ResourceClaim{onA})
	first := st.SeedNodeState(modelA, node, nil)
	if ds := first.stateOf(a.Spec.DriverName); ds == nil || ds.used[0] == 0 {
		t.Fatalf("the claim's instance is not in use")
	}

	onB := allocatedClaim("on-b", "node-b", b.Spec.DriverName, modelA.drivers[a.Spec.DriverName].insts[1].id)
	st2 := st.WithChanges(nil, nil, nil, []*resourceapi.ResourceClaim{onB})
	if got := st2.SeedNodeState(modelA, node, first); got != first {
		t.Errorf("a change on another node gave node-a a new state")
	}
	if got := st2.SeedNodeState(modelA, v1tNode("node-a"), first); got == first {
		t.Errorf("another node object kept the state")
	}
	if got := st2.SeedNodeState(NewModel("node-a", []*resourceapi.NodeResourceSlice{a}), node, first); got == first {
		t.Errorf("another model kept the state")
	}
	if got := st2.SeedNodeState(modelA, node, NewNodeState(modelA, node, nil), nil); got == first {
		t.Errorf("a state not derived from the one state was taken as the view")
	}

	// A state built afresh from the same claims (another order) holds
	// the same IDs: the view is kept, and answers at once afterwards.
	fresh := NewState(inv, nil, []*resourceapi.ResourceClaim{onB, onA})
	if got := fresh.SeedNodeState(modelA, node, nil, first); got != first {
		t.Errorf("a state built afresh from the same claims gave node-a a new state")
	}

	st3 := st2.WithChanges(nil, nil, []*resourceapi.ResourceClaim{onA}, nil)
	third := st3.SeedNodeState(modelA, node, first)
	if third == first || third.stateOf(a.Spec.DriverName) != nil {
		t.Errorf("releasing node-a's claim kept its state")
	}
	if got := st3.SeedNodeState(modelA, node, third); got != third {
		t.Errorf("an empty node's view was not kept")
	}
}

// TestWithSeedResults: allocation results no claim holds yet count as
// the claims holding them would.
func TestWithSeedResults(t *testing.T) {
	sl := v1tSeedNode("node-a", 4)
	inv := NewInventory(nil, []*resourceapi.NodeResourceSlice{sl})
	model := NewModel("node-a", []*resourceapi.NodeResourceSlice{sl})
	c := allocatedClaim("c", "node-a", "gpu", model.drivers["gpu"].insts[0].id)
	base := NewState(inv, nil, nil)
	want := base.WithChanges(nil, nil, nil, []*resourceapi.ResourceClaim{c}).SeedNodeState(model, nil)
	got := base.WithSeedResults(c.Status.Allocation).SeedNodeState(model, nil)
	compareSeedUse(t, 0, model, want, got)
	if ds := got.stateOf("gpu"); ds == nil || ds.used[0] == 0 {
		t.Fatal("the result's instance is not in use")
	}
}
