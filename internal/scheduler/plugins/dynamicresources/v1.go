package dynamicresources

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	"allot.dev/allot/pkg/allocator/engine"
)

// resource.k8s.io/v1 claims go through the same plugin as the seeds'
// v1alpha2 claims: PreFilter splits a pod's claims by the version they
// are stored in, and the shared steps go through the pod's parts
// (parts.go); the v1 part (partV1) is judged with allocator.AllocateV1
// over one device inventory (v1 ResourceSlices and the seed slices seen
// as v1 devices), and its claims are kept in memory and bound as the
// v1alpha2 part's are, fenced per (node, driver) alike. Device use is one state for both versions
// (allocator.State, the v1Objects' base state): the seed side reads a
// node's state from it (State.SeedNodeState), so neither API hands out
// a device the other one did.

// v1Objects are the v1 part of Objects (the v1 claims are in the Objects'
// claim set). The inventory is shared by the Objects of one listing; the
// base state, which counts the claims of both versions, belongs to one
// Objects (claim events change those claims).
type v1Objects struct {
	*v1Shared
	st *v1StateHolder
}

type v1Shared struct {
	inv   *v1Inventory
	admin map[string]bool // namespaces allowing admin access
}

// v1Inventory is the device inventory of one set of slices, built once on
// first use; Next hands it on while the slices are the same objects.
type v1Inventory struct {
	slices []*resourcev1.ResourceSlice
	seed   []*resourceapi.NodeResourceSlice
	// seedless leaves the seed slices out of the inventory while no v1
	// claim is known: only v1 claims allocate seed devices as v1 devices,
	// and the one state counts v1alpha2 claims by their instance IDs
	// without the inventory, so a seed-only cluster does not project its
	// slices. The first v1 claim event brings a full inventory
	// (WithClaimChanges).
	seedless bool
	// model is the Objects' compiled Model of a node's seed slices: the
	// inventory's seed devices come from the same Model the seed path
	// allocates on, compiled once.
	model func(node string, slices []*resourceapi.NodeResourceSlice) *allocator.Model
	rules []*resourcev1.DeviceTaintRule // the models' taint rules too

	once  sync.Once
	inv   *engine.Inventory
	pools map[[2]string]string // (driver, pool) -> the node of a pool local to one node, else ""
}

type v1StateHolder struct {
	once   sync.Once
	state  atomic.Pointer[allocator.State] // set once built
	claims *allocator.ClaimSet             // what a state built afresh counts
	// from, when set, is the built state of an Objects this one follows
	// and deltas the claim changes since, in order: the state is derived
	// from it instead of counting every claim again. Never modified once
	// the holder is shared, so that following may read them while the
	// state is being built.
	from   *allocator.State
	deltas []claimDelta
}

// maxPendingDeltas bounds the claim changes a chain of Objects whose
// state nobody asked for (answer reuse took every node) carries: at the
// bound the state is derived at once.
const maxPendingDeltas = 16

// claimDelta is what changed between two Objects' claims, for their v1
// base states: the claims counted before (removed) and after (added).
type claimDelta struct {
	removeV1, addV1     []*resourcev1.ResourceClaim
	removeSeed, addSeed []*resourceapi.ResourceClaim
}

// seed records that a key's seed claim (views are not seed claims) was old
// and is now cur (either may be nil).
func (d *claimDelta) seed(old, cur *resourceapi.ResourceClaim) {
	if old != nil && !resourceapi.IsView(old) {
		d.removeSeed = append(d.removeSeed, old)
	}
	if cur != nil && !resourceapi.IsView(cur) {
		d.addSeed = append(d.addSeed, cur)
	}
}

// built returns the state if it was built.
func (h *v1StateHolder) built() *allocator.State { return h.state.Load() }

// following returns the holder of the Objects that follow v after the
// claim changes delta, with these claims: its state is derived from the
// last built state of v's line, and built afresh when there is none.
func (v *v1Objects) following(claims *allocator.ClaimSet, delta claimDelta) *v1StateHolder {
	h := &v1StateHolder{claims: claims}
	switch from := v.st.built(); {
	case from != nil:
		h.from, h.deltas = from, []claimDelta{delta}
	case v.st.from != nil:
		h.from, h.deltas = v.st.from, append(slices.Clip(v.st.deltas), delta)
		if len(h.deltas) >= maxPendingDeltas {
			h.state.Store(h.derive())
			h.from, h.deltas = nil, nil
		}
	}
	return h
}

// derive applies the pending deltas to from.
func (h *v1StateHolder) derive() *allocator.State {
	st := h.from
	for _, d := range h.deltas {
		st = st.WithChanges(d.removeV1, d.addV1, d.removeSeed, d.addSeed)
	}
	return st
}

func newV1Objects(l Lists) *v1Objects {
	v := &v1Shared{inv: &v1Inventory{slices: l.V1Slices, seed: l.Slices, rules: l.TaintRules, seedless: len(l.V1Claims) == 0},
		admin: l.AdminNamespaces}
	return &v1Objects{v1Shared: v, st: &v1StateHolder{}}
}

// withClaims is v with a base state to be built from these claims.
func (v *v1Objects) withClaims(claims *allocator.ClaimSet) *v1Objects {
	return &v1Objects{v1Shared: v.v1Shared, st: &v1StateHolder{claims: claims}}
}

// keepInventory hands prev's inventory on to v when the slices are the
// same objects.
func (v *v1Objects) keepInventory(prev *v1Objects) {
	if prev != nil && prev.inv.seedless == v.inv.seedless && sameSet(prev.inv.slices, v.inv.slices) && sameSet(prev.inv.seed, v.inv.seed) && sameSet(prev.inv.rules, v.inv.rules) {
		v.inv = prev.inv
	}
}

func (v *v1Shared) inventory() *engine.Inventory {
	h := v.inv
	h.once.Do(func() {
		seed := h.seed
		if h.seedless {
			seed = nil
		}
		h.inv = allocator.NewInventoryTainted(h.slices, seed, h.model, h.rules)
		h.pools = map[[2]string]string{}
		for _, p := range h.inv.Pools() {
			h.pools[[2]string{p.Driver, p.Name}] = p.Node
		}
	})
	return h.inv
}

// localPool reports whether the pool's devices are on one node.
func (v *v1Shared) localPool(driver, pool string) bool {
	node, _ := v.poolNode(driver, pool)
	return node != ""
}

// poolNode returns the node of a pool of the inventory that is local to
// one node ("" for another pool), and whether the inventory has the
// pool.
func (v *v1Shared) poolNode(driver, pool string) (string, bool) {
	v.inventory()
	node, ok := v.inv.pools[[2]string{driver, pool}]
	return node, ok
}

func (v *v1Objects) baseState() *allocator.State {
	h := v.st
	if st := h.built(); st != nil {
		return st
	}
	h.once.Do(func() {
		if h.from != nil {
			h.state.Store(h.derive())
			return
		}
		inv := v.inventory()
		var seed []*resourceapi.ResourceClaim
		var all []*resourcev1.ResourceClaim
		if h.claims != nil {
			for _, c := range h.claims.Claims() {
				if !resourceapi.IsView(c) {
					seed = append(seed, c)
				}
			}
			all = h.claims.V1Claims()
		}
		h.state.Store(allocator.NewState(inv, all, seed))
	})
	return h.state.Load()
}

// V1GeneratedKey is allocator.GeneratedKeyV1, for the scheduler's v1
// claim informer.
var V1GeneratedKey = allocator.GeneratedKeyV1

// touchOf adds to t where the v1 claim's allocated devices are, for
// answer reuse: the node of a pool local to one node (a v1 pool whose
// slices name one node, or a projected seed pool, named after its
// node); all nodes for a device of any other pool (network-attached, or
// unknown to the inventory), whose use may matter on any node. Admin
// access counts too: it is rare, and this errs on the safe side.
func (o *Objects) touchOf(c *resourcev1.ResourceClaim, t *allocator.Touch) {
	if c == nil || c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		node, known := o.v1.poolNode(r.Driver, r.Pool)
		if !known && o.seedPool(r.Driver, r.Pool) {
			node = r.Pool
		}
		if node == "" {
			t.All = true
			continue
		}
		if !slices.Contains(t.Nodes, node) {
			t.Nodes = append(t.Nodes, node)
		}
	}
}

// seedPool reports whether pool is a node with seed slices of driver
// (the projected seed pool of that node and driver).
func (o *Objects) seedPool(driver, pool string) bool {
	return slices.ContainsFunc(o.slices[pool], func(s *resourceapi.NodeResourceSlice) bool { return s.Spec.DriverName == driver })
}

// seedNodesOf appends to nodes the nodes with seed slices among the
// pools of the v1 claim's allocated devices (a projected seed pool is
// named after its node), admin access aside: the nodes whose seed state
// the claim changes.
func (o *Objects) seedNodesOf(c *resourcev1.ResourceClaim, nodes []string) []string {
	if c.Status.Allocation == nil {
		return nodes
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		if _, ok := o.slices[r.Pool]; ok && !slices.Contains(nodes, r.Pool) {
			nodes = append(nodes, r.Pool)
		}
	}
	return nodes
}

// V1Claim returns the v1 claim namespace/name.
func (o *Objects) V1Claim(namespace, name string) (*resourcev1.ResourceClaim, bool) {
	return o.claims.V1Claim(namespace + "/" + name)
}

// ClaimAnyVersion returns a claim of either version, a v1 claim as its
// v1alpha2 view (its allocation and reservations).
func (o *Objects) ClaimAnyVersion(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	if c, ok := o.V1Claim(namespace, name); ok {
		return resourceconv.ClaimToV1alpha2(c), true
	}
	return o.Claim(namespace, name)
}

// v1Part is the v1 side of one cycle's state.
type v1Part struct {
	claims  []allocator.V1Claim
	req     *allocator.V1Request
	results []*allocator.V1Result // by snapshot position
	mu      sync.Mutex
	chosen  []*resourcev1.ResourceClaim
	newly   []bool
	node    string // Reserve's

	pod     *corev1.Pod
	ext     *extendedPart // the pod's extended resources DRA may serve; nil without
	variant *extVariant   // Reserve's: the extended-resource claim is chosen's last
	created string        // that claim's name once the scheduler created it
}

// ownSeedResults are the allocations Reserve makes for the pod's
// v1alpha2 claims on node i of the snapshot (nil when they were not
// checked there, do not fit, or there are none).
func (s *stateData) ownSeedResults(i int) []*resourceapi.AllocationResult {
	if s.req == nil || len(s.req.Claims()) == 0 || i < 0 {
		return nil
	}
	res := s.results.load(i)
	if res == nil || !res.Fits {
		return nil
	}
	return res.For(s.req).Build()
}

func (o *Objects) v1ClaimByKey(key string) (*resourcev1.ResourceClaim, bool) {
	return o.claims.V1Claim(key)
}

// prepareV1 resolves the v1 claims PreFilter found: their classes must
// exist (else Wait).
func (s *stateData) prepareV1(pod *corev1.Pod) *framework.Status {
	v := s.v1
	if v == nil {
		return nil
	}
	if len(v.claims) == 0 {
		v.req = allocator.PrepareV1(pod, nil, s.objects.catalog.DeviceClass)
		return nil
	}
	var waiting []string
	for _, c := range v.claims {
		for _, class := range deviceClassesOf(c.Claim) {
			if s.objects.catalog.DeviceClass(class) == nil {
				waiting = append(waiting, s.wait(allocator.ReasonClassNotFound, claimKeyV1(c.Claim),
					fmt.Sprintf("device class %s of claim %s", class, claimKeyV1(c.Claim))))
			}
		}
	}
	if len(waiting) > 0 {
		return framework.NewStatus(framework.Wait, waiting...)
	}
	v.req = allocator.PrepareV1(pod, v.claims, s.objects.catalog.DeviceClass)
	if rs := v.req.Unresolvable(); len(rs) > 0 {
		s.reasons = append(s.reasons, rs...)
		return podLevelStatus(rs)
	}
	return nil
}

func deviceClassesOf(c *resourcev1.ResourceClaim) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil {
			add(r.Exactly.DeviceClassName)
		}
		for _, sub := range r.FirstAvailable {
			add(sub.DeviceClassName)
		}
	}
	return out
}

func claimKeyV1(c *resourcev1.ResourceClaim) string { return c.Namespace + "/" + c.Name }

// checkV1 judges the pod's v1 claims on node i, once per cycle.
func (s *stateData) checkV1(ctx context.Context, node *corev1.Node, i int) (*allocator.V1Result, error) {
	v := s.v1
	v.mu.Lock()
	if i >= 0 && i < len(v.results) && v.results[i] != nil {
		r := v.results[i]
		v.mu.Unlock()
		return r, nil
	}
	v.mu.Unlock()
	st := s.cycle.state()
	if own := s.ownSeedResults(i); len(own) > 0 {
		// The pod's own v1alpha2 claims, as Reserve will allocate them
		// on this node, hold their devices for its v1 claims.
		st = st.WithSeedResults(own...)
	}
	req := v.req
	if vr := s.variantOn(node); vr != nil {
		req = vr.req
	}
	res, err := allocator.CheckV1(ctx, req, st, node) // Reserve builds the chosen node's allocations
	if err != nil {
		return nil, err
	}
	v.store(i, res)
	return res, nil
}

// store keeps res as the answer on node i of the snapshot. It may be an
// earlier cycle's (answer reuse): readers of its reasons or allocations
// take it For the request (forNode).
func (v *v1Part) store(i int, res *allocator.V1Result) {
	if i >= 0 && i < len(v.results) {
		v.mu.Lock()
		v.results[i] = res
		v.mu.Unlock()
	}
}

// forNode is res, the answer on node, as AllocateV1 gives it to the
// request judged there (the pod's v1 request, or its variant with the
// extended-resource claim): an answer reused from an earlier pod names
// that pod's claims (R12 in reuse.go).
func (s *stateData) forNode(res *allocator.V1Result, node *corev1.Node) *allocator.V1Result {
	if vr := s.variantOn(node); vr != nil {
		return res.For(vr.req)
	}
	return res.For(s.v1.req)
}

// boundV1 returns the v1 claims as the binding to node will leave them.
func (s *stateData) boundV1(ctx context.Context, pod *corev1.Pod, node *corev1.Node, i int) ([]*resourcev1.ResourceClaim, []bool, error) {
	v := s.v1
	res, err := s.checkV1(ctx, node, i)
	if err != nil {
		return nil, nil, err
	}
	res = s.forNode(res, node)
	if !res.Fits {
		return nil, nil, fmt.Errorf("%s: reserve on node %s, where the v1 claims do not fit", Name, node.Name)
	}
	v.node = node.Name
	claims := v.claims
	v.variant = s.variantOn(node)
	if v.variant != nil {
		claims = v.variant.claims
	}
	var out []*resourcev1.ResourceClaim
	var newly []bool
	allocs := res.Build()
	for j, c := range claims {
		claim := c.Claim.DeepCopy()
		var a *resourcev1.AllocationResult
		if j < len(allocs) {
			a = allocs[j]
		}
		if a != nil {
			claim.Status.Allocation = a
			if !slices.Contains(claim.Finalizers, resourceapi.DeleteProtectionFinalizer) {
				claim.Finalizers = append(claim.Finalizers, resourceapi.DeleteProtectionFinalizer)
			}
		}
		if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
				Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
		out = append(out, claim)
		newly = append(newly, a != nil)
	}
	return out, newly, nil
}

// fenceKeysV1 are the fences of the pod's new v1 allocations: (node,
// driver) for each driver, and the driver's shared fence for devices not
// local to one node.
func (s *stateData) fenceKeysV1(node string) [][2]string {
	v := s.v1
	if v == nil {
		return nil
	}
	var out [][2]string
	for i, c := range v.chosen {
		if !v.newly[i] {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			k := [2]string{node, r.Driver}
			if !s.objects.v1.localPool(r.Driver, r.Pool) {
				k[0] = SharedFenceNode
			}
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
			if k[0] == SharedFenceNode && !slices.Contains(out, [2]string{node, r.Driver}) {
				out = append(out, [2]string{node, r.Driver})
			}
		}
	}
	return out
}

// SharedFenceNode is the node name of the fences of devices that are not
// local to one node (internal/apiserver.SharedFenceNode).
const SharedFenceNode = "_shared"

// GeneratedClaimV1 returns the name of the v1 claim generated for the
// entry of the pod with that UID, if there is one.
func (o *Objects) GeneratedClaimV1(podUID types.UID, entry string) (string, bool) {
	return o.claims.GeneratedV1(podUID, entry)
}

// clone copies the part for a cloned cycle state.
func (v *v1Part) clone() *v1Part {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return &v1Part{claims: v.claims, req: v.req, results: slices.Clone(v.results),
		chosen: slices.Clone(v.chosen), newly: slices.Clone(v.newly), node: v.node,
		pod: v.pod, ext: v.ext, variant: v.variant, created: v.created}
}

// node is the node at position i of the cycle's snapshot, nil when i is
// not one.
func (r *nodeResults) node(i int) *corev1.Node {
	nodes := r.snap.Nodes()
	if i < 0 || i >= len(nodes) {
		return nil
	}
	return nodes[i].Node()
}

// claimHintV1 is claimHint for v1 claims: the same metadata, and an
// allocation exactly when the claim has one (as their v1alpha2 views
// have), read in place rather than through a converted view.
func claimHintV1(pod *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
	return judgeClaimEvent(pod, v1HintClaim(oldObj), v1HintClaim(newObj))
}

func v1HintClaim(o any) hintClaim {
	if c, ok := o.(*resourcev1.ResourceClaim); ok && c != nil {
		return hintClaim{meta: &c.ObjectMeta, allocated: c.Status.Allocation != nil}
	}
	return hintClaim{}
}
