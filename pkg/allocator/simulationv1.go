package allocator

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The resource.k8s.io/v1 side of a Simulation. A pod's claims stored as
// v1 (Snapshot.V1Claims, or generated from Snapshot.V1ClaimTemplates) are
// allocated with AllocateV1 over one inventory of the simulation's
// devices of both APIs (the nodes' NodeResourceSlices and the v1
// ResourceSlices, tainted by Snapshot.TaintRules) and one State that
// counts the claims of both versions; v1 claims holding seed devices
// count on the seed NodeStates through seedAllocations. A pod
// with claims of both versions fits a node when both parts do, the v1
// part after the seed part's choice. Seed-only simulations build none of
// this.

// simDerived is the inventory and base v1 state of one version of a
// simulation's nodes, slices and claims, built on first use (Filter may
// run concurrently) and replaced, never changed, when they change: after
// a change of nodes or slices everything is built again; after claim
// changes the inventory is kept and a built state is derived with the
// changes (State.WithChanges), so binding pod after pod costs the
// changes, not a recount.
type simDerived struct {
	inv *simInv
	mu  sync.Mutex
	st  *State // nil until built
}

type simInv struct {
	once sync.Once
	inv  *engine.Inventory
}

func newSimDerived() *simDerived { return &simDerived{inv: &simInv{}} }

// nodesChanged drops the derived inventory and state after a change of
// nodes or slices.
func (s *Simulation) nodesChanged() { s.derived = newSimDerived() }

// claimsChanged derives the state after claim changes: the claims counted
// before (remove) and after (add); nil entries are skipped.
func (s *Simulation) claimsChanged(removeV1, addV1 []*resourcev1.ResourceClaim, removeSeed, addSeed []*resourceapi.ResourceClaim) {
	old := s.derived
	d := &simDerived{inv: old.inv}
	old.mu.Lock()
	if old.st != nil {
		d.st = old.st.WithChanges(removeV1, addV1, removeSeed, addSeed)
	}
	old.mu.Unlock()
	s.derived = d
}

// v1Inventory returns the inventory of the current nodes and slices.
func (s *Simulation) v1Inventory() *engine.Inventory {
	h := s.derived.inv
	h.once.Do(func() { h.inv = s.inventory() })
	return h.inv
}

// v1State returns the inventory and base state of the current version.
func (s *Simulation) v1State() (*engine.Inventory, *State) {
	inv := s.v1Inventory()
	d := s.derived
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.st == nil {
		var seed []*resourceapi.ResourceClaim
		for _, k := range s.claims.Keys() {
			c, _ := s.claims.Get(k)
			seed = append(seed, c)
		}
		d.st = NewState(inv, s.V1Claims(), seed)
	}
	return inv, d.st
}

// inventory builds the device inventory of the simulation's nodes.
func (s *Simulation) inventory() *engine.Inventory {
	var seed []*resourceapi.NodeResourceSlice
	models := map[string]*Model{}
	for _, name := range s.nodes.Keys() {
		n, _ := s.nodes.Get(name)
		seed = append(seed, n.slices...)
		models[name] = n.state.Model()
	}
	var v1 []*resourcev1.ResourceSlice
	for _, k := range s.v1slices.Keys() {
		sl, _ := s.v1slices.Get(k)
		v1 = append(v1, sl)
	}
	return NewInventoryTainted(v1, seed, func(node string, sl []*resourceapi.NodeResourceSlice) *Model {
		if m := models[node]; m != nil {
			return m
		}
		return NewModelTainted(node, sl, s.rules)
	}, s.rules)
}

// seedViews are what v1 claims hold of seed devices, as v1alpha2 claims
// for the seed NodeStates, by node.
func seedViewsByNode(inv *engine.Inventory, claims []*resourcev1.ResourceClaim) map[string][]*resourceapi.ResourceClaim {
	out := map[string][]*resourceapi.ResourceClaim{}
	for _, v := range seedAllocations(inv, claims...) {
		for _, n := range AllocatedNodes(v) {
			out[n] = append(out[n], v)
		}
	}
	return out
}

// V1Claim returns the current state of a claim stored as
// resource.k8s.io/v1.
func (s *Simulation) V1Claim(namespace, name string) (*resourcev1.ResourceClaim, bool) {
	return s.v1claims.Get(namespace + "/" + name)
}

// V1Claims returns the resource.k8s.io/v1 claims, sorted by namespace
// and name.
func (s *Simulation) V1Claims() []*resourcev1.ResourceClaim {
	keys := s.v1claims.Keys()
	out := make([]*resourcev1.ResourceClaim, 0, len(keys))
	for _, k := range keys {
		c, _ := s.v1claims.Get(k)
		out = append(out, c)
	}
	return out
}

// AddV1Claim adds a resource.k8s.io/v1 claim, such as one generated for
// a pod. One that is allocated counts where its devices are.
func (s *Simulation) AddV1Claim(c *resourcev1.ResourceClaim) error {
	key := c.Namespace + "/" + c.Name
	_, v1 := s.v1claims.Get(key)
	if _, seed := s.claims.Get(key); seed || v1 {
		return fmt.Errorf("add claim %s: %w", key, ErrClaimExists)
	}
	s.v1claims.Set(key, c)
	if c.Status.Allocation != nil {
		for n, views := range seedViewsByNode(s.v1Inventory(), []*resourcev1.ResourceClaim{c}) {
			if sn, ok := s.nodes.Get(n); ok {
				s.nodes.Set(n, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithAllocated(views...)})
			}
		}
		s.claimsChanged(nil, []*resourcev1.ResourceClaim{c}, nil, nil)
	}
	return nil
}

// prepareV1 resolves the pod's v1 claims (names) for AllocateV1, or nil
// when it has none.
func (s *Simulation) prepareV1(pod *corev1.Pod, names []string) *V1Request {
	if len(names) == 0 {
		return nil
	}
	claims := make([]V1Claim, 0, len(names))
	for _, n := range names {
		c, _ := s.v1claims.Get(pod.Namespace + "/" + n)
		claims = append(claims, V1Claim{Claim: c})
	}
	return PrepareV1(pod, claims, s.cat.DeviceClass)
}

// filterBoth is filter for a pod with claims of both versions: the seed
// part first, then, after the seed part's choice, the v1 part. It also
// returns the v1 answer (nil without v1 claims or when the node was not
// judged).
func (s *Simulation) filterBoth(ctx context.Context, req *Request, v1req *V1Request, pod *corev1.Pod, nodeName string) (*Result, *V1Result, error) {
	if v1req == nil {
		res, err := s.filter(ctx, req, pod, nodeName)
		return res, nil, err
	}
	sn, ok := s.nodes.Get(nodeName)
	if !ok || (s.opts.NodeFilter != nil && len(s.opts.NodeFilter(pod, sn.node)) > 0) {
		res, err := s.filter(ctx, req, pod, nodeName) // the node's own reasons
		return res, nil, err
	}
	res, err := Allocate(ctx, req, sn.state)
	if err != nil {
		return nil, nil, err
	}
	if rs := v1req.Unresolvable(); len(rs) > 0 {
		return withV1Reasons(res, rs), nil, nil
	}
	_, st := s.v1State()
	if res.Fits {
		// The seed part's choice holds its seed devices for the v1 part.
		var own []*resourceapi.ResourceClaim
		for i, c := range req.Claims() {
			if a := res.Allocations[i]; a != nil {
				cp := c.Claim.DeepCopy()
				cp.Status.Allocation = a
				own = append(own, cp)
			}
		}
		if len(own) > 0 {
			st = st.WithChanges(nil, nil, nil, own)
		}
	}
	v1res, err := AllocateV1(ctx, v1req, st, sn.node)
	if err != nil {
		return nil, nil, err
	}
	if !v1res.Fits {
		return withV1Reasons(res, v1res.Reasons), v1res, nil
	}
	return res, v1res, nil
}

// withV1Reasons is res rejected with the v1 part's reasons too.
func withV1Reasons(res *Result, reasons []Reason) *Result {
	return finish(&Result{Node: res.Node, Reasons: append(slices.Clip(res.Reasons), reasons...),
		CapacityBefore: res.CapacityBefore})
}

// bindV1 records the pod's v1 claims as the binding leaves them:
// allocated (with the delete-protection finalizer) and reserved for the
// pod, their seed devices counted on the node's seed state.
func (s *Simulation) bindV1(pod *corev1.Pod, nodeName string, v1req *V1Request, v1res *V1Result) {
	var allocated []*resourcev1.ResourceClaim
	for i, c := range v1req.Claims() {
		claim := c.Claim.DeepCopy()
		if i < len(v1res.Allocations) && v1res.Allocations[i] != nil {
			claim.Status.Allocation = v1res.Allocations[i]
			if !slices.Contains(claim.Finalizers, resourceapi.DeleteProtectionFinalizer) {
				claim.Finalizers = append(claim.Finalizers, resourceapi.DeleteProtectionFinalizer)
			}
			allocated = append(allocated, claim)
		}
		if !v1ReservedFor(claim, pod) {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
				Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
		s.v1claims.Set(claim.Namespace+"/"+claim.Name, claim)
	}
	if len(allocated) > 0 {
		if views := seedViewsByNode(s.v1Inventory(), allocated)[nodeName]; len(views) > 0 {
			sn, _ := s.nodes.Get(nodeName)
			s.nodes.Set(nodeName, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithAllocated(views...)})
		}
		s.claimsChanged(nil, allocated, nil, nil)
	}
}

// evictV1 removes the pod from its v1 claims' reservedFor and deallocates
// the claims no pod uses any more.
func (s *Simulation) evictV1(pod *corev1.Pod, names []string) {
	inv := s.v1Inventory()
	var freed []*resourcev1.ResourceClaim
	for _, n := range names {
		old, ok := s.v1claims.Get(pod.Namespace + "/" + n)
		if !ok || !v1ReservedFor(old, pod) {
			continue
		}
		claim := old.DeepCopy()
		claim.Status.ReservedFor = slices.DeleteFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
			return IsPod(resourceapi.ResourceClaimConsumerReference{APIGroup: r.APIGroup, Resource: r.Resource, Name: r.Name, UID: r.UID}, pod)
		})
		if len(claim.Status.ReservedFor) == 0 && claim.Status.Allocation != nil {
			for node, views := range seedViewsByNode(inv, []*resourcev1.ResourceClaim{old}) {
				if sn, ok := s.nodes.Get(node); ok {
					s.nodes.Set(node, &simNode{node: sn.node, slices: sn.slices, state: sn.state.WithoutAllocated(views...)})
				}
			}
			freed = append(freed, old)
			claim.Status.Allocation = nil
			claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == resourceapi.DeleteProtectionFinalizer })
		}
		s.v1claims.Set(claim.Namespace+"/"+claim.Name, claim)
	}
	if len(freed) > 0 {
		s.claimsChanged(freed, nil, nil, nil)
	}
}

// generateV1 is GenerateClaims for an entry whose template is a v1 one
// (and no v1alpha2 template has its name): a v1 claim named POD-ENTRY
// (NewClaimFromTemplateV1). It reports whether it recorded the entry.
func (s *Simulation) generateV1(out *corev1.Pod, pc corev1.PodResourceClaim) bool {
	tmpl := s.cat.V1ClaimTemplate(out.Namespace, *pc.ResourceClaimTemplateName)
	if tmpl == nil {
		return false
	}
	name := out.Name + "-" + pc.Name
	_, seedExists := s.claims.Get(out.Namespace + "/" + name)
	if _, exists := s.v1claims.Get(out.Namespace + "/" + name); !exists && !seedExists {
		claim := NewClaimFromTemplateV1(out, pc.Name, tmpl, name)
		claim.TypeMeta = metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaim"}
		s.v1claims.Set(out.Namespace+"/"+name, claim)
	}
	out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses,
		corev1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr(name)})
	return true
}

// v1UsersOn lists the pods holding v1 claims allocated on the node, for
// RemoveNode.
func (s *Simulation) v1UsersOn(node string) []string {
	var users []string
	for _, c := range s.V1Claims() {
		if c.Status.Allocation == nil || !slices.Contains(v1AllocatedNodes(c.Status.Allocation), node) {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			users = append(users, r.Resource+"/"+r.Name+" (claim "+c.Namespace+"/"+c.Name+")")
		}
	}
	return users
}

// v1AllocatedNodes are the node names an allocation's node selector
// names (matchFields metadata.name In).
func v1AllocatedNodes(a *resourcev1.AllocationResult) []string {
	if a.NodeSelector == nil {
		return nil
	}
	var out []string
	for _, t := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == "In" {
				out = append(out, f.Values...)
			}
		}
	}
	return out
}

// seedAllocations is what the v1 claims hold of projected seed devices
// as v1alpha2 allocations: the bridge the scheduler used before the one
// device-use state, kept for the Simulation's seed NodeStates until it
// counts on the one state too (docs/decisions.md, "Still to do after
// (b)"): for each claim with such devices, a claim of the same namespace
// and name whose allocation has a structured handle per driver and node
// listing the instances. Admin-access results are left out.
func seedAllocations(inv *engine.Inventory, claims ...*resourcev1.ResourceClaim) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c == nil || c.Status.Allocation == nil {
			continue
		}
		var handles []resourceapi.ResourceHandle
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			x, ok := inv.Lookup(r.Driver, r.Pool, r.Device)
			var d *engine.Device
			if ok {
				_, d = inv.At(x)
			}
			if !ok || d.SeedInstance == "" {
				continue
			}
			i := slices.IndexFunc(handles, func(h resourceapi.ResourceHandle) bool {
				return h.DriverName == r.Driver && h.StructuredData.NodeName == r.Pool
			})
			if i < 0 {
				i = len(handles)
				handles = append(handles, resourceapi.ResourceHandle{DriverName: r.Driver, StructuredData: &resourceapi.StructuredResourceHandle{
					NodeName: r.Pool, Partitionable: &resourceapi.PartitionableAllocationResult{}}})
			}
			p := handles[i].StructuredData.Partitionable
			p.Instances = append(p.Instances, resourceapi.AllocatedResourceInstance{ID: d.SeedInstance})
		}
		if len(handles) == 0 {
			continue
		}
		sc := &resourceapi.ResourceClaim{}
		sc.Namespace, sc.Name, sc.UID = c.Namespace, c.Name, c.UID
		sc.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: handles}
		out = append(out, sc)
	}
	return out
}
