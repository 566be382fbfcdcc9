package dynamicresources_test

import (
	"fmt"
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// onGPU returns a copy of c allocated gpu-N of node.
func onGPU(c *resourceapi.ResourceClaim, node, gpu string) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.ResourceVersion = "9"
	c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{{
		DriverName: driver, StructuredData: &resourceapi.StructuredResourceHandle{NodeName: node,
			Partitionable: &resourceapi.PartitionableAllocationResult{Instances: []resourceapi.AllocatedResourceInstance{{ID: gpu}}}},
	}}}
	return c
}

// TestInventoryUsesNodeModels: the v1 device inventory's seed devices
// come from the Models the seed path allocates on (one compile per node
// for both APIs): building the inventory first fills the Objects' model
// cache, and the seed path then finds its Models there. (With a v1 claim
// in the lists: without one the seed slices stay out of the inventory,
// TestSeedOnlyInventory.)
func TestInventoryUsesNodeModels(t *testing.T) {
	l := baseLists(t)
	l.Slices = []*resourceapi.NodeResourceSlice{slice(t, "n1"), slice(t, "n2")}
	l.V1Claims = []*resourcev1.ResourceClaim{v1Claim("x")}
	o := dynamicresources.NewObjects(l)
	if n := dynamicresources.CachedModels(o); n != 0 {
		t.Fatalf("%d models compiled before any use", n)
	}
	inv := dynamicresources.V1Inventory(o)
	if len(inv.Pools()) != 2 {
		t.Fatalf("inventory has %d pools, want the seed pools of n1 and n2", len(inv.Pools()))
	}
	if n := dynamicresources.CachedModels(o); n != 2 {
		t.Fatalf("the inventory compiled %d node models through the Objects' cache, want 2", n)
	}
	m := o.Model("n1")
	if o.Model("n1") != m || dynamicresources.CachedModels(o) != 2 {
		t.Fatal("the seed path compiled a node's model again")
	}
}

// TestSeedOnlyInventory: while no v1 claim is known the seed slices stay
// out of the v1 inventory (a seed-only cluster does not project them; the
// one state counts v1alpha2 claims without it); the first v1 claim event
// brings them in, and a v1 claim on a seed GPU is in use for v1alpha2
// claims from then on.
func TestSeedOnlyInventory(t *testing.T) {
	n1 := schedtest.MakeNode("n1").Obj()
	l := baseLists(t, onGPU(claim("a", "small"), "n1", "gpu-0"))
	l.Slices = []*resourceapi.NodeResourceSlice{slice(t, "n1")}
	o := dynamicresources.NewObjects(l)
	if got := o.NodeState(n1).Capacity(); got != 1 {
		t.Fatalf("n1 capacity %d, want 1 (gpu-0 held by a v1alpha2 claim)", got)
	}
	if n := len(dynamicresources.V1Inventory(o).Pools()); n != 0 {
		t.Fatalf("a seed-only inventory has %d pools, want none", n)
	}
	o = o.WithClaimChanges("30", dynamicresources.ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/v": v1OnGPU("v", "n1", "gpu-1", "")}})
	if n := len(dynamicresources.V1Inventory(o).Pools()); n != 1 {
		t.Fatalf("after a v1 claim the inventory has %d pools, want n1's seed pool", n)
	}
	if got := o.NodeState(n1).Capacity(); got != 0 {
		t.Fatalf("n1 capacity %d, want 0 (gpu-1 held by the v1 claim)", got)
	}
	if !dynamicresources.V1InUse(o, driver, "n1", "gpu-0") || !dynamicresources.V1InUse(o, driver, "n1", "gpu-1") {
		t.Fatal("the one state does not count both GPUs in use")
	}
}

// TestNextReusesUnchangedNodes: Next keeps the models of nodes whose
// slices are the same objects and the states of nodes whose allocated
// claims are too; whatever changed is rebuilt and shows the change.
func TestNextReusesUnchangedNodes(t *testing.T) {
	n1, n2 := schedtest.MakeNode("n1").Obj(), schedtest.MakeNode("n2").Obj()
	s1, s2 := slice(t, "n1"), slice(t, "n2")
	a, b := onGPU(claim("a", "small"), "n1", "gpu-0"), onGPU(claim("b", "small"), "n2", "gpu-0")
	l := baseLists(t, a, b)
	l.Slices = []*resourceapi.NodeResourceSlice{s1, s2}
	o := dynamicresources.NewObjects(l)
	m1, m2 := o.Model("n1"), o.Model("n2")
	st1, st2 := o.NodeState(n1), o.NodeState(n2)
	if st1.Capacity() != 1 || st2.Capacity() != 1 {
		t.Fatalf("capacity %d and %d, want 1 free GPU on each node", st1.Capacity(), st2.Capacity())
	}

	// Claim a is freed (a new object); nothing on n2 changes. The lister
	// returns the same objects in another order.
	l.Claims = []*resourceapi.ResourceClaim{b, claim("a", "small")}
	l.Slices = []*resourceapi.NodeResourceSlice{s2, s1}
	next := o.Next(l)
	if next.Model("n1") != m1 || next.Model("n2") != m2 {
		t.Fatal("Next recompiled the model of a node whose slices are the same objects")
	}
	if next.NodeState(n2) != st2 {
		t.Fatal("Next rebuilt the state of n2, whose claims did not change")
	}
	if got := next.NodeState(n1); got == st1 || got.Capacity() != 2 {
		t.Fatalf("n1 after its claim was freed: reused %v, capacity %d, want a new state with 2 free GPUs", got == st1, got.Capacity())
	}

	// The same slice again, fetched anew after a relist: same UID and
	// resourceVersion, so still the same object. A changed slice (new
	// resourceVersion) is recompiled; n2's slice disappearing drops it.
	s1.UID, s1.ResourceVersion = "s1", "3"
	relisted := s1.DeepCopy()
	changed := slice(t, "n1")
	changed.UID, changed.ResourceVersion = "s1", "4"
	l.Slices = []*resourceapi.NodeResourceSlice{s1, s2}
	base := dynamicresources.NewObjects(l)
	mBase := base.Model("n1")
	l.Slices = []*resourceapi.NodeResourceSlice{relisted}
	if base.Next(l).Model("n1") != mBase {
		t.Fatal("a relisted, unchanged slice recompiled the model")
	}
	l.Slices = []*resourceapi.NodeResourceSlice{changed}
	if base.Next(l).Model("n1") == mBase {
		t.Fatal("a changed slice kept the old model")
	}
	l.Slices = []*resourceapi.NodeResourceSlice{s1}
	if got := base.Next(l).NodeState(n2); got.Capacity() != 0 {
		t.Fatalf("n2 without slices: capacity %d, want 0", got.Capacity())
	}

	// A node object that changed gets a state of its own.
	n1b := n1.DeepCopy()
	n1b.Labels = map[string]string{"x": "y"}
	if got := next.NodeState(n1b); got.Node() != n1b {
		t.Fatal("NodeState of a changed node object returned the state of the old one")
	}
}

// TestWithClaimsKeepsOtherNodesStates: a simulated binding on n1
// (WithClaimChanges, as `allot simulate` records one) leaves
// n2's state as it was.
func TestWithClaimsKeepsOtherNodesStates(t *testing.T) {
	n1, n2 := schedtest.MakeNode("n1").Obj(), schedtest.MakeNode("n2").Obj()
	l := baseLists(t, claim("a", "small"))
	l.Slices = []*resourceapi.NodeResourceSlice{slice(t, "n1"), slice(t, "n2")}
	o := dynamicresources.NewObjects(l)
	st1, st2 := o.NodeState(n1), o.NodeState(n2)
	w := o.WithClaimChanges("", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/a": onGPU(claim("a", "small"), "n1", "gpu-1")}})
	if w.NodeState(n2) != st2 {
		t.Fatal("WithClaimChanges rebuilt the state of a node it did not touch")
	}
	if got := w.NodeState(n1); got == st1 || got.Capacity() != 1 {
		t.Fatalf("n1 after the simulated binding: capacity %d, want 1", got.Capacity())
	}
	if o.NodeState(n1) != st1 || st1.Capacity() != 2 {
		t.Fatal("WithClaimChanges changed the states of the Objects it came from")
	}
}

// TestNextComparesManyClaimsAsASet: a node with many claims keeps its
// state when the lister returns the same claims in another order, and
// loses it when one of them changes what the node has in use.
func TestNextComparesManyClaimsAsASet(t *testing.T) {
	n1 := schedtest.MakeNode("n1").Obj()
	var claims []*resourceapi.ResourceClaim
	for i := range 20 {
		c := onGPU(claim(fmt.Sprintf("c%d", i), "small"), "n1", "gpu-0")
		c.UID = types.UID(fmt.Sprintf("uid-%d", i))
		claims = append(claims, c)
	}
	l := baseLists(t, claims...)
	o := dynamicresources.NewObjects(l)
	st := o.NodeState(n1)
	l.Claims = slices.Clone(claims)
	slices.Reverse(l.Claims)
	next := o.Next(l)
	if next.NodeState(n1) != st {
		t.Fatal("the same claims in another order rebuilt the node's state")
	}
	// A claim updated with the same allocation leaves the node's
	// instances in use as they were: the state stays. A claim freed
	// changes them.
	l.Claims = slices.Clone(l.Claims)
	l.Claims[3] = l.Claims[3].DeepCopy()
	l.Claims[3].ResourceVersion = "10"
	next = next.Next(l)
	if next.NodeState(n1) != st {
		t.Fatal("a claim updated with the same allocation rebuilt the node's state")
	}
	l.Claims = slices.Clone(l.Claims)
	l.Claims[3] = l.Claims[3].DeepCopy()
	l.Claims[3].ResourceVersion = "11"
	l.Claims[3].Status.Allocation = nil
	if next.Next(l).NodeState(n1) == st {
		t.Fatal("a changed claim kept the node's old state")
	}
}

// TestWithClaimUpdates: applying v1alpha2 claim events (WithClaimChanges) to Objects gives the node
// states that indexing the new lists from scratch gives, keeps the states
// of nodes the events did not touch, and leaves the old Objects as it was.
func TestWithClaimUpdates(t *testing.T) {
	n1, n2 := schedtest.MakeNode("n1").Obj(), schedtest.MakeNode("n2").Obj()
	a, b := onGPU(claim("a", "small"), "n1", "gpu-0"), onGPU(claim("b", "small"), "n2", "gpu-0")
	c := claim("c", "small")
	l := baseLists(t, a, b, c)
	l.Slices = []*resourceapi.NodeResourceSlice{slice(t, "n1"), slice(t, "n2")}
	o := dynamicresources.NewObjects(l)
	st2 := o.NodeState(n2)
	if got := o.NodeState(n1).Capacity(); got != 1 {
		t.Fatalf("n1 capacity %d, want 1", got)
	}

	// a is freed, c allocated on n1's other GPU, then deleted: n1 has both
	// GPUs free; b is untouched.
	cOn1 := onGPU(c, "n1", "gpu-1")
	steps := []map[string]*resourceapi.ResourceClaim{
		{"default/a": claim("a", "small"), "default/c": cOn1},
		{"default/c": nil},
	}
	cur := o
	wantFree := []int{1, 2}
	for i, upd := range steps {
		next := cur.WithClaimChanges(fmt.Sprint(10+i), dynamicresources.ClaimChanges{Seed: upd})
		if got := next.NodeState(n1).Capacity(); got != wantFree[i] {
			t.Fatalf("step %d: n1 capacity %d, want %d", i, got, wantFree[i])
		}
		if next.NodeState(n2) != st2 {
			t.Fatalf("step %d: the state of n2, which no event touched, was rebuilt", i)
		}
		if next.Revision() != fmt.Sprint(10+i) {
			t.Fatalf("step %d: revision %q", i, next.Revision())
		}
		cur = next
	}
	if _, ok := cur.Claim("default", "c"); ok {
		t.Fatal("deleted claim c is still there")
	}
	// A changed node object gets a new state, carried over or not.
	if cur.NodeState(schedtest.MakeNode("n2").Obj()) == st2 {
		t.Fatal("n2's state survived a change of the node object")
	}
	if got := o.NodeState(n1).Capacity(); got != 1 {
		t.Fatalf("the first Objects changed: n1 capacity %d, want 1", got)
	}
	if c, _ := o.Claim("default", "c"); c.Status.Allocation != nil {
		t.Fatal("the first Objects shows c allocated")
	}

	// The same as indexing the final lists.
	l.Claims = []*resourceapi.ResourceClaim{claim("a", "small"), b}
	fresh := dynamicresources.NewObjects(l)
	for _, n := range []*corev1.Node{n1, n2} {
		if got, want := cur.NodeState(n).Capacity(), fresh.NodeState(n).Capacity(); got != want {
			t.Fatalf("%s: capacity %d after updates, %d indexed afresh", n.Name, got, want)
		}
	}
	if got, want := len(cur.Claims()), len(fresh.Claims()); got != want {
		t.Fatalf("%d claims after updates, %d indexed afresh", got, want)
	}
}

// GeneratedClaim follows the claims generated for pods' template entries
// through updates: new, replaced, being deleted, deleted.
func TestGeneratedClaimIndex(t *testing.T) {
	yes := true
	gen := func(name, uid, entry string) *resourceapi.ResourceClaim {
		c := claim(name, "small")
		c.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: entry}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: types.UID(uid), Controller: &yes}}
		return c
	}
	o := dynamicresources.NewObjects(baseLists(t, gen("a", "u1", "gpu"), claim("plain", "small")))
	want := func(o *dynamicresources.Objects, uid, entry, name string) {
		t.Helper()
		got, ok := o.GeneratedClaim(types.UID(uid), entry)
		if name == "" && ok || name != "" && got != name {
			t.Fatalf("GeneratedClaim(%s, %s) = %q, %v; want %q", uid, entry, got, ok, name)
		}
	}
	want(o, "u1", "gpu", "a")
	want(o, "u1", "fpga", "")
	deleting := gen("a", "u1", "gpu")
	deleting.DeletionTimestamp = &metav1.Time{}
	o2 := o.WithClaimChanges("8", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/a": deleting, "default/b": gen("b", "u2", "gpu")}})
	want(o2, "u1", "gpu", "")
	want(o2, "u2", "gpu", "b")
	o3 := o2.WithClaimChanges("9", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/a": nil, "default/c": gen("c", "u1", "gpu")}})
	want(o3, "u1", "gpu", "c")
	o4 := o3.WithClaimChanges("10", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/b": nil}})
	want(o4, "u2", "gpu", "")
	want(o, "u1", "gpu", "a") // earlier versions are unchanged
	want(o2, "u2", "gpu", "b")
	want(o.WithClaimChanges("11", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/d": gen("d", "u3", "x")}}), "u3", "x", "d")
}

// v1OnGPU is a v1 claim allocated the seed GPU gpu of node (seen as the
// v1 device NODE/gpu), generated for the pod with uid's entry "gpu" when
// uid is set.
func v1OnGPU(name, node, gpu string, uid types.UID) *resourcev1.ResourceClaim {
	c := v1Claim(name)
	c.ResourceVersion = "9"
	if uid != "" {
		c.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: "gpu"}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p-" + name, UID: uid, Controller: ptr(true)}}
	}
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driver, Pool: node, Device: gpu}}}}
	return c
}

// TestV1ClaimWhenTheV1EventComesFirst: a claim recreated as v1 under the
// name of a v1alpha2 claim, its v1 event seen before the v1alpha2
// deletion: the v1alpha2 claim stays until its deletion is seen, then
// only the v1 claim is left, its device in use for v1alpha2 claims too
// (one device-use state; the claim set holds no views of v1 claims).
func TestV1ClaimWhenTheV1EventComesFirst(t *testing.T) {
	n1 := schedtest.MakeNode("n1").Obj()
	old := onGPU(claim("y", "small"), "n1", "gpu-0")
	o := dynamicresources.NewObjects(mixedLists(t, []*resourceapi.ResourceClaim{old}))
	o = o.WithClaimChanges("30", dynamicresources.ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/y": v1OnGPU("y", "n1", "gpu-1", "")}})
	if c, ok := o.Claim("default", "y"); !ok || resourceapi.IsView(c) {
		t.Fatalf("before its deletion is seen, the v1alpha2 claim y should stay: %v %v", ok, c)
	}
	o = o.WithClaimChanges("31", dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/y": nil}})
	if c, ok := o.Claim("default", "y"); ok {
		t.Fatalf("after the v1alpha2 deletion, y is still a v1alpha2 claim: %v", c)
	}
	if _, ok := o.V1Claim("default", "y"); !ok {
		t.Fatal("after the v1alpha2 deletion, the v1 claim y is gone")
	}
	if got := o.NodeState(n1).Capacity(); got != 1 {
		t.Fatalf("n1 capacity %d, want 1 (gpu-1 held by the v1 claim)", got)
	}
}

// TestWithClaimChanges: v1 claim events applied claim by claim give the
// Objects that indexing the final lists gives: the same claims (so the
// same free GPUs for v1alpha2 claims), the
// same v1 claims and generated-claim index, the same v1 free devices;
// and a name moving between versions, or a v1 event of a name that is a
// v1alpha2 claim, keeps the v1alpha2 claim.
func TestWithClaimChanges(t *testing.T) {
	n1 := schedtest.MakeNode("n1").Obj()
	a := onGPU(claim("a", "small"), "n1", "gpu-0")
	x := claim("x", "small") // v1alpha2, becomes a v1 claim
	l := mixedLists(t, []*resourceapi.ResourceClaim{a, x}, v1OnGPU("v", "n1", "gpu-1", "uid-v"))
	cur := dynamicresources.NewObjects(l)
	if got := cur.NodeState(n1).Capacity(); got != 0 {
		t.Fatalf("n1 capacity %d, want 0 (a v1alpha2 and a v1 claim)", got)
	}
	steps := []struct {
		upd   map[string]*resourceapi.ResourceClaim
		updV1 map[string]*resourcev1.ResourceClaim
		free  int
	}{
		// v is deleted: its GPU is free for both versions.
		{nil, map[string]*resourcev1.ResourceClaim{"default/v": nil}, 1},
		// x goes from v1alpha2 to v1, allocated gpu-1.
		{map[string]*resourceapi.ResourceClaim{"default/x": nil}, map[string]*resourcev1.ResourceClaim{"default/x": v1OnGPU("x", "n1", "gpu-1", "uid-x")}, 0},
		// A v1 "deleted" event of a's name leaves the v1alpha2 claim a.
		{nil, map[string]*resourcev1.ResourceClaim{"default/a": nil}, 0},
		// x is deallocated.
		{nil, map[string]*resourcev1.ResourceClaim{"default/x": v1Claim("x")}, 1},
	}
	v1Free := func(o *dynamicresources.Objects) int {
		n := 0
		for _, g := range []string{"gpu-0", "gpu-1"} {
			if !dynamicresources.V1InUse(o, driver, "n1", g) {
				n++
			}
		}
		return n
	}
	for i, st := range steps {
		v1Free(cur) // built: the next state is derived from it
		cur = cur.WithClaimChanges(fmt.Sprint(20+i), dynamicresources.ClaimChanges{Seed: st.upd, V1: st.updV1})
		if got := cur.NodeState(n1).Capacity(); got != st.free {
			t.Fatalf("step %d: n1 capacity %d, want %d", i, got, st.free)
		}
		if got := v1Free(cur); got != st.free {
			t.Fatalf("step %d: %d GPUs free in the derived v1 state, want %d", i, got, st.free)
		}
	}
	if _, ok := cur.Claim("default", "a"); !ok {
		t.Fatal("the v1alpha2 claim a is gone after a v1 event of its name")
	}
	if _, ok := cur.V1Claim("default", "v"); ok {
		t.Fatal("deleted v1 claim v is still there")
	}
	if name, ok := cur.GeneratedClaimV1("uid-v", "gpu"); ok {
		t.Fatalf("the generated index still names %s for the deleted claim's pod", name)
	}

	l.Claims = []*resourceapi.ResourceClaim{a}
	l.V1Claims = []*resourcev1.ResourceClaim{v1Claim("x")}
	fresh := dynamicresources.NewObjects(l)
	if got, want := cur.NodeState(n1).Capacity(), fresh.NodeState(n1).Capacity(); got != want {
		t.Fatalf("capacity %d after changes, %d indexed afresh", got, want)
	}
	if got, want := v1Free(cur), v1Free(fresh); got != want {
		t.Fatalf("%d v1 GPUs free after changes, %d indexed afresh", got, want)
	}
	keys := func(o *dynamicresources.Objects) []string {
		var out []string
		for _, c := range o.Claims() {
			out = append(out, fmt.Sprintf("%s/%s view=%v allocated=%v", c.Namespace, c.Name, resourceapi.IsView(c), c.Status.Allocation != nil))
		}
		slices.Sort(out)
		return out
	}
	if got, want := keys(cur), keys(fresh); !slices.Equal(got, want) {
		t.Fatalf("claims after changes %q, indexed afresh %q", got, want)
	}
	if _, ok := cur.V1Claim("default", "x"); !ok {
		t.Fatal("v1 claim x missing")
	}
	// The v1 side sees the one free GPU too: x fits.
	snap := framework.NewSnapshot([]*corev1.Node{n1}, nil).WithExtension(dynamicresources.Name, cur)
	p := dynamicresources.New()
	if _, st := cycle(t, p, snap, podUsing("v1-user", "x")); !st.IsSuccess() {
		t.Fatalf("v1 claim x on the free GPU: %s", st.Message())
	}
}
