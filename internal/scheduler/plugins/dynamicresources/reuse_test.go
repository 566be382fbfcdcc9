package dynamicresources

import (
	"fmt"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
)

// The tests of the reuse rules R1-R8 and of R4 and R5 for v1 claims
// (reuse.go), on the view alone: an answer remembered at position 1 of a
// four-node snapshot, then asked for under the condition the rule is
// about. R9 is in controlplane_test.go, the rules PreFilter, Filter and
// Reserve decide for v1 claims in reusev1_test.go.

const reuseSig = "sig"

type reuseFixture struct {
	p    *DynamicResources
	snap *framework.Snapshot
	o    *Objects
	res  *allocator.Result
}

func newReuseFixture(t *testing.T) *reuseFixture {
	t.Helper()
	return &reuseFixture{p: New(), snap: reuseSnapshot(4), o: NewObjects(Lists{}), res: &allocator.Result{Fits: true}}
}

func reuseSnapshot(n int) *framework.Snapshot {
	var nodes []*corev1.Node
	for i := range n {
		nodes = append(nodes, schedtest.MakeNode(fmt.Sprintf("n%d", i)).Obj())
	}
	return framework.NewSnapshot(nodes, nil)
}

// view is a cycle's view on o over snap; inFlight names nodes with claims
// of pods in flight.
func (f *reuseFixture) view(o *Objects, snap *framework.Snapshot, inFlight ...string) *reuseView {
	s := &stateData{objects: o, extra: map[string]bool{}}
	for _, n := range inFlight {
		s.extra[n] = true
	}
	return f.p.reuseView(s, snap)
}

// rememberAt1 remembers f.res at node n1 (position 1) on o.
func (f *reuseFixture) rememberAt1(o *Objects) {
	f.view(o, f.snap).remember(1, f.snap.Nodes()[1], reuseSig, seedAnswer(f.res))
}

// heldAt1 reports whether a cycle on o takes the answer at n1.
func (f *reuseFixture) heldAt1(o *Objects, inFlight ...string) bool {
	a := f.view(o, f.snap, inFlight...).answer(1, f.snap.Nodes()[1], reuseSig)
	return a != nil && a.of[0] == any(f.res)
}

// update is a WithClaimChanges link that changes the claims of the nodes
// named (none: a link that touches no node).
func update(o *Objects, nodes ...string) *Objects {
	upd := map[string]*resourceapi.ResourceClaim{}
	for _, n := range nodes {
		c := &resourceapi.ResourceClaim{}
		c.Namespace, c.Name, c.ResourceVersion = "default", "c-"+n, "2"
		c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{{
			DriverName: "d", StructuredData: &resourceapi.StructuredResourceHandle{NodeName: n}}}}
		upd[claimKey(c)] = c
	}
	return o.WithClaimChanges("2", ClaimChanges{Seed: upd})
}

// links derives n WithClaimChanges links from o that touch no node.
func links(o *Objects, n int) *Objects {
	for range n {
		o = update(o)
	}
	return o
}

func TestReuseNeedsTheSameNodeInfo(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	if !f.heldAt1(f.o) {
		t.Fatal("the answer is not taken at all: the tests below prove nothing")
	}
	again := reuseSnapshot(4) // same nodes, new NodeInfos
	if f.view(f.o, again).answer(1, again.Nodes()[1], reuseSig) != nil {
		t.Fatal("R1: an answer was taken for another NodeInfo at the position")
	}
}

func TestReuseNeedsTheSameSignature(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	if f.view(f.o, f.snap).answer(1, f.snap.Nodes()[1], "other") != nil {
		t.Fatal("R2: an answer was taken for another signature")
	}
}

func TestReuseNeedsAnAncestor(t *testing.T) {
	// A fixture per case: taking an answer from an ancestor may stamp it
	// again (R7), which would hide the next case's outcome.
	for _, tc := range []struct {
		name string
		next func(*Objects) *Objects
		held bool
	}{
		{"WithClaimChanges of v1alpha2 claims (the parent)", func(o *Objects) *Objects { return update(o) }, true},
		{"WithClaimChanges without changes (the parent)", func(o *Objects) *Objects { return o.WithClaimChanges("2", ClaimChanges{}) }, true},
		{"Next, which starts a new line", func(o *Objects) *Objects { return o.Next(Lists{}) }, false},
		{"unrelated Objects", func(*Objects) *Objects { return NewObjects(Lists{}) }, false},
	} {
		f := newReuseFixture(t)
		f.rememberAt1(f.o)
		if got := f.heldAt1(tc.next(f.o)); got != tc.held {
			t.Errorf("R3: %s: answer taken = %v, want %v", tc.name, got, tc.held)
		}
	}
}

func TestReuseSkipsTouchedNodes(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	if !f.heldAt1(update(f.o, "n2")) {
		t.Fatal("R4: an update of another node made n1's answer stale")
	}
	// A fresh fixture: taking the answer above stamped it on that line.
	g := newReuseFixture(t)
	g.rememberAt1(g.o)
	if g.heldAt1(update(update(g.o, "n1"), "n2")) {
		t.Fatal("R4: an answer was taken for a node whose claims changed since")
	}
}

func TestReuseSkipsNodesWithPodsInFlight(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	if f.heldAt1(f.o, "n1") {
		t.Fatal("R5: an answer was taken for a node with claims of pods in flight")
	}
	g := newReuseFixture(t)
	g.view(g.o, g.snap, "n1").remember(1, g.snap.Nodes()[1], reuseSig, seedAnswer(g.res))
	if g.heldAt1(g.o) {
		t.Fatal("R5: an answer computed with claims of pods in flight was remembered")
	}
}

func TestReuseAncestryIsBounded(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	if !f.heldAt1(links(f.o, maxAncestry-1)) {
		t.Fatalf("R6: an answer %d links back was not taken", maxAncestry-1)
	}
	g := newReuseFixture(t)
	g.rememberAt1(g.o)
	o := links(g.o, maxAncestry+1)
	if g.heldAt1(o) {
		t.Fatalf("R6: an answer %d links back was taken: the ancestry is not bounded", maxAncestry+1)
	}
	n := 0
	for a := o.claims; a != nil; a = a.Parent() {
		n++
	}
	if n > maxAncestry {
		t.Fatalf("R6: the ancestry is %d Objects long, want at most %d", n, maxAncestry)
	}
}

func TestReuseRestampsAgingAnswers(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	o := links(f.o, maxAncestry-2)
	if !f.heldAt1(o) { // in the older half: stamped again with o
		t.Fatal("the aging answer was not taken")
	}
	if !f.heldAt1(links(o, maxAncestry-2)) {
		t.Fatal("R7: an answer taken in the older half of the ancestry was not stamped again and fell off")
	}
}

func TestReuseSlotsFollowTheSnapshotLength(t *testing.T) {
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	longer := reuseSnapshot(5)
	f.view(f.o, longer) // a cycle on a snapshot of another length
	if f.heldAt1(f.o) {
		t.Fatal("R8: the slots outlived a snapshot of another length")
	}
}

// TestStatusesAreSharedPerReasons: the nodes of a cycle rejected for the
// same slice of reasons (one answer, reused or taken For the request)
// share one Filter status, stamped with the plugin once; another slice
// gets its own.
func TestStatusesAreSharedPerReasons(t *testing.T) {
	r := newNodeResults(reuseSnapshot(2))
	a := []allocator.Reason{{Message: "a"}}
	b := []allocator.Reason{{Message: "a"}} // equal, but another slice
	sa := r.status(a)
	if sa != r.status(a) {
		t.Fatal("two nodes rejected for the same reasons got two statuses")
	}
	if sa == r.status(b) {
		t.Fatal("another slice of reasons got the first one's status")
	}
	if sa.Plugin() != Name {
		t.Fatalf("status plugin %q, want %q", sa.Plugin(), Name)
	}
	if c := r.clone(); c.status(a) != sa {
		t.Fatal("a cloned cycle state lost the shared statuses")
	}
}

// TestReuseSkipsNodesTouchedByV1Claims: R4 for resource.k8s.io/v1 claims,
// which the claim set does not hold: a v1 claim event that allocates or
// frees devices of a node's seed slices touches that node (one device-use
// state: the node's seed state changed), and only that node.
func TestReuseSkipsNodesTouchedByV1Claims(t *testing.T) {
	var l Lists
	for _, n := range []string{"n1", "n2"} {
		s := &resourceapi.NodeResourceSlice{}
		s.Name, s.Spec.NodeName, s.Spec.DriverName = "slice-"+n, n, "d"
		l.Slices = append(l.Slices, s)
	}
	l.V1Claims = []*resourcev1.ResourceClaim{pendingV1Claim()} // the first v1 claim event touches every node
	v1On := func(node string) map[string]*resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{}
		c.Namespace, c.Name, c.ResourceVersion = "default", "v-"+node, "2"
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "r", Driver: "d", Pool: node, Device: "gpu-0"}}}}
		return map[string]*resourcev1.ResourceClaim{claimKeyV1(c): c}
	}
	f := newReuseFixture(t)
	f.o = NewObjects(l)
	f.rememberAt1(f.o)
	if !f.heldAt1(f.o.WithClaimChanges("2", ClaimChanges{V1: v1On("n2")})) {
		t.Fatal("R4: a v1 claim on another node made n1's answer stale")
	}
	g := newReuseFixture(t)
	g.o = NewObjects(l)
	g.rememberAt1(g.o)
	allocated := g.o.WithClaimChanges("2", ClaimChanges{V1: v1On("n1")})
	if g.heldAt1(allocated) {
		t.Fatal("R4: an answer was taken for a node whose seed devices a v1 claim allocated since")
	}
	h := newReuseFixture(t)
	h.rememberAt1(allocated)
	if h.heldAt1(allocated.WithClaimChanges("3", ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/v-n1": nil}})) {
		t.Fatal("R4: an answer was taken for a node whose seed devices a v1 claim freed since")
	}
}

// v1Pools: v1 slices of driver d: pool local-n2 on node n2 and pool net,
// network-attached (all nodes), one device each.
func v1Pools() []*resourcev1.ResourceSlice {
	mk := func(pool string, node *string, all *bool) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{}
		s.Name = pool
		s.Spec = resourcev1.ResourceSliceSpec{Driver: "d", NodeName: node, AllNodes: all,
			Pool:    resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "dev-0"}}}
		return s
	}
	n2, all := "n2", true
	return []*resourcev1.ResourceSlice{mk("local-n2", &n2, nil), mk("net", nil, &all)}
}

// pendingV1Claim is a v1 claim not allocated: with one, the Objects'
// inventory has the seed devices from the start.
func pendingV1Claim() *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{}
	c.Namespace, c.Name, c.ResourceVersion = "default", "pending", "1"
	return c
}

// v1ClaimOn is a change of v1 claim v-<pool>, allocated device dev-0 of
// driver d's pool.
func v1ClaimOn(pool string) map[string]*resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{}
	c.Namespace, c.Name, c.ResourceVersion = "default", "v-"+pool, "2"
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "r", Driver: "d", Pool: pool, Device: "dev-0"}}}}
	return map[string]*resourcev1.ResourceClaim{claimKeyV1(c): c}
}

// TestReuseSkipsAllNodesAfterSharedPoolClaims: R4 for v1 pools. A v1
// claim on a pool local to another node leaves n1's answer; one on a
// network-attached pool, or on a pool the inventory does not know,
// touches every node, n1 too.
func TestReuseSkipsAllNodesAfterSharedPoolClaims(t *testing.T) {
	for _, tc := range []struct {
		pool string
		held bool
	}{
		{"local-n2", true},
		{"net", false},
		{"unknown", false},
	} {
		f := newReuseFixture(t)
		f.o = NewObjects(Lists{V1Slices: v1Pools(), V1Claims: []*resourcev1.ResourceClaim{pendingV1Claim()}})
		f.rememberAt1(f.o)
		if got := f.heldAt1(f.o.WithClaimChanges("2", ClaimChanges{V1: v1ClaimOn(tc.pool)})); got != tc.held {
			t.Errorf("R4: after a v1 claim on pool %s, n1's answer taken = %v, want %v", tc.pool, got, tc.held)
		}
	}
	// The first v1 claim of Objects listed without any changes their
	// inventory: every node counts as touched.
	first := newReuseFixture(t)
	first.o = NewObjects(Lists{V1Slices: v1Pools()})
	first.rememberAt1(first.o)
	if first.heldAt1(first.o.WithClaimChanges("2", ClaimChanges{V1: v1ClaimOn("local-n2")})) {
		t.Error("R4: an answer was taken across the first v1 claim, which changes the inventory")
	}
	// The v1 claim on n2's local pool touches n2.
	f := newReuseFixture(t)
	f.o = NewObjects(Lists{V1Slices: v1Pools(), V1Claims: []*resourcev1.ResourceClaim{pendingV1Claim()}})
	f.view(f.o, f.snap).remember(2, f.snap.Nodes()[2], reuseSig, seedAnswer(f.res))
	if a := f.view(f.o, f.snap).answer(2, f.snap.Nodes()[2], reuseSig); a == nil {
		t.Fatal("n2's answer is not taken at all")
	}
	g := newReuseFixture(t)
	g.o = NewObjects(Lists{V1Slices: v1Pools(), V1Claims: []*resourcev1.ResourceClaim{pendingV1Claim()}})
	g.view(g.o, g.snap).remember(2, g.snap.Nodes()[2], reuseSig, seedAnswer(g.res))
	if a := g.view(g.o.WithClaimChanges("2", ClaimChanges{V1: v1ClaimOn("local-n2")}), g.snap).answer(2, g.snap.Nodes()[2], reuseSig); a != nil {
		t.Error("R4: an answer was taken for a node whose local v1 pool a claim allocated since")
	}
}

// TestReuseOffWhileSharedPoolsAreInFlight: R5 for v1 claims of pods in
// flight, as PreFilter records them (stateData.inFlightV1): on a pool
// local to n1, n1 is neither answered from nor remembered; on a pool
// not local to one node, no node is.
func TestReuseOffWhileSharedPoolsAreInFlight(t *testing.T) {
	view := func(f *reuseFixture, inFlight allocator.Touch) *reuseView {
		return f.p.reuseView(&stateData{objects: f.o, extra: map[string]bool{}, inFlightV1: inFlight}, f.snap)
	}
	f := newReuseFixture(t)
	f.rememberAt1(f.o)
	if view(f, allocator.Touch{Nodes: []string{"n2"}}).answer(1, f.snap.Nodes()[1], reuseSig) == nil {
		t.Fatal("R5: v1 claims in flight on n2 made n1's answer stale")
	}
	if view(f, allocator.Touch{Nodes: []string{"n1"}}).answer(1, f.snap.Nodes()[1], reuseSig) != nil {
		t.Error("R5: an answer was taken for a node with v1 claims of pods in flight")
	}
	if view(f, allocator.Touch{All: true}).answer(1, f.snap.Nodes()[1], reuseSig) != nil {
		t.Error("R5: an answer was taken while a pod in flight holds devices of a pool not local to one node")
	}
	g := newReuseFixture(t)
	view(g, allocator.Touch{All: true}).remember(1, g.snap.Nodes()[1], reuseSig, seedAnswer(g.res))
	if g.heldAt1(g.o) {
		t.Error("R5: an answer computed while a pod in flight held devices of a shared pool was remembered")
	}
}

// seedAnswer is the answers of a pod with v1alpha2 claims only.
func seedAnswer(res *allocator.Result) *answers {
	return &answers{of: [maxParts]any{res}, n: 1, rejected: !res.Fits}
}
