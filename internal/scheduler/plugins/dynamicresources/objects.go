package dynamicresources

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Lists are the DRA objects of a cluster, as listed by an informer, by
// `allot explain` or read from files by `allot simulate`.
type Lists struct {
	Slices          []*resourceapi.NodeResourceSlice
	Classes         []*resourceapi.ResourceClass
	ClassParameters []*resourceapi.ResourceClassParameters
	ClaimParameters []*resourceapi.ResourceClaimParameters
	Claims          []*resourceapi.ResourceClaim
	// Contexts are the PodSchedulingContexts of pods whose control-plane
	// claims are being negotiated with their drivers (seed 003).
	Contexts []*resourceapi.PodSchedulingContext
	// Vendor are vendor parameter objects (CardParameters, ...); they are
	// snapshotted into allocations when a claim or class refers to them.
	Vendor []*unstructured.Unstructured
	// Revision is the allocation revision the lists are complete up to
	// (a resourceVersion): the fence of the bindings decided on them. ""
	// when unknown (simulations).
	Revision string

	// resource.k8s.io/v1: slices, classes, the claims stored as v1, and
	// the namespaces labelled resource.kubernetes.io/admin-access=true.
	V1Slices        []*resourcev1.ResourceSlice
	DeviceClasses   []*resourcev1.DeviceClass
	V1Claims        []*resourcev1.ResourceClaim
	AdminNamespaces map[string]bool
	// TaintRules are the DeviceTaintRules: they taint the devices of both
	// versions they select (allocator.NewModelTainted,
	// allocator.NewInventoryTainted).
	TaintRules []*resourcev1.DeviceTaintRule
}

// Objects is the immutable, indexed view of Lists that the plugin reads
// from framework.Snapshot.Extension(Name). Node models and base node
// states are built lazily, at most once per Objects, and are safe for
// concurrent use; Next and WithClaimChanges hand them on to the Objects they
// derive for as long as the objects they were built from are the same.
// Nothing in an Objects may be modified.
type Objects struct {
	revision string
	slices   map[string][]*resourceapi.NodeResourceSlice  // by node
	catalog  *allocator.Catalog                           // classes (both versions), parameters, vendor objects; carried over by Next while they are unchanged
	claims   *allocator.ClaimSet                          // with the claims allocated per node and the ancestry answer reuse reads (reuse.go)
	contexts map[string]*resourceapi.PodSchedulingContext // namespace/name
	models   *modelCache                                  // shared with WithClaimChanges' Objects, carried over by Next
	states   *stateCache                                  // shared with WithClaimChanges' Objects, carried over by Next
	v1       *v1Objects                                   // v1 slices and claims, and the one device-use state (v1.go)
}

// maxAncestry is how many Objects a chain of WithClaimChanges keeps:
// their ClaimSets' ancestry.
const maxAncestry = allocator.MaxAncestry

// NewObjects indexes l. The lists are not copied; callers must not modify
// them or their objects afterwards.
func NewObjects(l Lists) *Objects { return newObjects(l, nil, nil) }

// newObjects is NewObjects with the catalog of l, or nil to build it.
func newObjects(l Lists, cat *allocator.Catalog, prev *Objects) *Objects {
	if cat == nil {
		cat = allocator.NewCatalog(&allocator.Snapshot{
			Classes: l.Classes, ClassParameters: l.ClassParameters, ClaimParameters: l.ClaimParameters,
			VendorParameters: l.Vendor, DeviceClasses: l.DeviceClasses,
		})
	}
	o := &Objects{
		revision: l.Revision, slices: map[string][]*resourceapi.NodeResourceSlice{},
		catalog:  cat,
		contexts: map[string]*resourceapi.PodSchedulingContext{},
		models:   &modelCache{m: map[string]cachedModel{}, rules: l.TaintRules},
		states:   &stateCache{m: map[string]cachedState{}},
	}
	for _, c := range l.Contexts {
		o.contexts[c.Namespace+"/"+c.Name] = c
	}
	for _, s := range l.Slices {
		o.slices[s.Spec.NodeName] = append(o.slices[s.Spec.NodeName], s)
	}
	for _, sl := range o.slices {
		// Listers return objects in no fixed order: by name, a node's
		// model is the same for the same slices.
		slices.SortFunc(sl, func(a, b *resourceapi.NodeResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	o.v1 = newV1Objects(l)
	models, byNode := o.models, o.slices
	o.v1.inv.model = func(node string, _ []*resourceapi.NodeResourceSlice) *allocator.Model {
		return models.get(node, byNode[node])
	}
	if prev != nil {
		o.v1.keepInventory(prev.v1)
	}
	claims := l.Claims
	o.claims = allocator.NewClaimSet(claims, o.slices, l.V1Claims...)
	o.v1 = o.v1.withClaims(o.claims)
	return o
}

// ClaimChanges are claim events of both resource.k8s.io versions, by
// namespace/name: the claim as its informer now holds it, nil for one
// that is gone. A claim is stored in one version; its v1alpha2 view
// (resourceapi.IsView) in Seed is counted by the claim set only.
type ClaimChanges struct {
	Seed map[string]*resourceapi.ResourceClaim
	V1   map[string]*resourcev1.ResourceClaim
}

// WithClaimChanges returns the Objects that follow o after claim events
// of both versions (ch); revision is the new fence. It is the one way
// claims change in an Objects: the scheduler's claim informers and a
// simulation's bindings alike. The claim set gets both
// (allocator.ClaimSet.UpdateTouching), updating the claims allocated per
// node for the claims that changed instead of indexing them again; the
// one device-use state follows them; the inventory, catalog, models and
// node states are shared with o. The nodes where a changed v1 claim held
// or holds devices of a pool local to one node (seed or v1) count as
// touched in the claim set's ancestry (answer reuse reads it; seed claims
// touch the nodes of their structured handles); a device of another pool
// touches all nodes (touchOf). A steady rate of claim events of either
// version costs the events, not a listing of every DRA object nor a copy
// of every claim.
func (o *Objects) WithClaimChanges(revision string, ch ClaimChanges) *Objects {
	var delta claimDelta
	var touched allocator.Touch
	first := false
	for k, c := range ch.V1 {
		if old, ok := o.claims.V1Claim(k); ok {
			delta.removeV1 = append(delta.removeV1, old)
			o.touchOf(old, &touched)
		}
		if c != nil {
			delta.addV1 = append(delta.addV1, c)
			o.touchOf(c, &touched)
			first = o.v1.inv.seedless
		}
	}
	for k, c := range ch.Seed {
		ns, name, _ := strings.Cut(k, "/")
		old, _ := o.claims.Claim(ns, name)
		delta.seed(old, c)
	}
	out := *o
	out.revision = revision
	// The inventory changes with the first v1 claim: no v1 answer can
	// predate it, but say so anyway.
	touched.All = touched.All || first
	out.claims = o.claims.UpdateTouching(ch.Seed, ch.V1, touched)
	if first {
		// The first v1 claim: the seed slices join the inventory, and
		// the one state is counted afresh over it.
		v := *o.v1.v1Shared
		v.inv = &v1Inventory{slices: v.inv.slices, seed: v.inv.seed, model: v.inv.model, rules: v.inv.rules}
		out.v1 = &v1Objects{v1Shared: &v, st: &v1StateHolder{claims: out.claims}}
		return &out
	}
	out.v1 = &v1Objects{v1Shared: o.v1.v1Shared, st: o.v1.following(out.claims, delta)}
	return &out
}

// GeneratedKey and EntryKey are allocator's, for the scheduler's claim
// informer.
var (
	GeneratedKey = allocator.GeneratedKey
	EntryKey     = allocator.EntryKey
)

// GeneratedClaim returns the name of the claim generated for the entry of
// the pod with that UID (resourceapi.GeneratedFor), if there is one.
func (o *Objects) GeneratedClaim(podUID types.UID, entry string) (string, bool) {
	return o.claims.Generated(podUID, entry)
}

// Claim returns the claim namespace/name.
func (o *Objects) Claim(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	return o.claims.Claim(namespace, name)
}

// Context returns the PodSchedulingContext namespace/name (named after
// its pod).
func (o *Objects) Context(namespace, name string) (*resourceapi.PodSchedulingContext, bool) {
	c, ok := o.contexts[namespace+"/"+name]
	return c, ok
}

// Claims returns every claim, sorted by namespace and name.
func (o *Objects) Claims() []*resourceapi.ResourceClaim {
	return o.claims.Claims()
}

// Revision is the fence revision of the lists ("" when unknown).
func (o *Objects) Revision() string { return o.revision }

// Model returns the compiled slices of a node (cached).
func (o *Objects) Model(node string) *allocator.Model { return o.models.get(node, o.slices[node]) }

// NodeState returns the seed allocation state of node from the claims of
// o (not from in-memory reservations): the seed view of the node in the
// one device-use state, which counts the claims of both versions
// (allocator.State.SeedNodeState). A state built for an earlier Objects
// is reused while the node's model, the node object and the node's
// entries of the one state are the same.
func (o *Objects) NodeState(node *corev1.Node) *allocator.NodeState {
	st, _ := o.nodeState(node)
	return st
}

// nodeState is NodeState, and whether the node says its runtime cannot
// inject CDI devices (LabelCDI "false"), which Filter asks of every node
// and the cache answers with the state.
func (o *Objects) nodeState(node *corev1.Node) (*allocator.NodeState, bool) {
	model := o.Model(node.Name)
	e, _ := o.states.get(node.Name)
	st := o.v1.baseState().SeedNodeState(model, node, e.state, e.older)
	switch st {
	case e.state:
		return st, e.noCDI
	case e.older:
		return st, noCDI(node)
	}
	return st, o.states.put(node.Name, st).noCDI
}

// noCDI reports whether the node says its runtime cannot inject CDI
// devices.
func noCDI(n *corev1.Node) bool { return n != nil && n.Labels[LabelCDI] == "false" }

// snapNodes are a snapshot's nodes for allocator.ClaimSet.TouchedIn.
type snapNodes struct{ *framework.Snapshot }

func (s snapNodes) NodeName(i int) string { return s.Nodes()[i].Name() }

// modelCache holds one Model per node with the slices it was compiled
// from.
type modelCache struct {
	mu sync.Mutex
	m  map[string]cachedModel
	// rules are the DeviceTaintRules every model is compiled with; Next
	// carries models over only while they are the same objects.
	rules []*resourcev1.DeviceTaintRule
}

type cachedModel struct {
	slices []*resourceapi.NodeResourceSlice
	model  *allocator.Model
}

// get returns the node's model, compiling it (outside the lock, so that
// parallel filters compile different nodes at once) unless it was
// compiled from the same slices.
func (c *modelCache) get(node string, sl []*resourceapi.NodeResourceSlice) *allocator.Model {
	c.mu.Lock()
	e, ok := c.m[node]
	c.mu.Unlock()
	if ok && sameObjects(e.slices, sl) {
		return e.model
	}
	m := allocator.NewModelTainted(node, sl, c.rules)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[node]; ok && sameObjects(e.slices, sl) {
		return e.model // compiled meanwhile by another filter
	}
	c.m[node] = cachedModel{slices: sl, model: m}
	return m
}

// stateCache holds the last two base NodeStates derived per node, which
// answer again while the node's model, node object and instances in use
// are unchanged (allocator.State.SeedNodeState): Objects of one lineage
// share it (two, so that an Objects and the WithClaimChanges Objects of a
// simulation do not evict each other's), Next carries over the entries of
// nodes whose model is the same.
type stateCache struct {
	mu sync.RWMutex
	m  map[string]cachedState
}

type cachedState struct {
	state *allocator.NodeState
	noCDI bool                 // of state.Node()
	older *allocator.NodeState // the one before, or nil
}

// get returns the node's entry.
func (c *stateCache) get(name string) (cachedState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[name]
	return e, ok
}

// put makes st the node's last state.
func (c *stateCache) put(name string, st *allocator.NodeState) cachedState {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.m[name]
	e := cachedState{state: st, noCDI: noCDI(st.Node())}
	if prev.state != nil && prev.state.Model() == st.Model() {
		e.older = prev.state
	}
	c.m[name] = e
	return e
}

// copy returns a new cache with the entries whose model keep accepts.
func (c *stateCache) copy(keep func(node string, m *allocator.Model) bool) *stateCache {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := &stateCache{m: make(map[string]cachedState, len(c.m))}
	for n, e := range c.m {
		if keep(n, e.state.Model()) {
			out.m[n] = e
		}
	}
	return out
}

// Next indexes l like NewObjects, carrying over from o the catalog when
// l's classes, parameters and vendor objects are the same objects, the
// compiled models (with their cached selector outcomes) of the nodes whose
// slices are the same objects in l, and the node states of those nodes
// whose node object and allocated claims are unchanged too, instead of
// compiling every node again. Nodes whose slices are gone are dropped.
func (o *Objects) Next(l Lists) *Objects {
	var cat *allocator.Catalog
	if in := o.catalog.Inputs(); sameSet(in.Classes, l.Classes) && sameSet(in.ClassParameters, l.ClassParameters) &&
		sameSet(in.ClaimParameters, l.ClaimParameters) && sameSet(in.VendorParameters, l.Vendor) &&
		sameSet(in.DeviceClasses, l.DeviceClasses) {
		cat = o.catalog
	}
	n := newObjects(l, cat, o)
	sameRules := sameSet(o.models.rules, l.TaintRules)
	o.models.mu.Lock()
	for node, e := range o.models.m {
		if sameRules && len(e.slices) > 0 && sameObjects(e.slices, n.slices[node]) {
			n.models.m[node] = e
		}
	}
	o.models.mu.Unlock()
	n.states = o.states.copy(func(node string, m *allocator.Model) bool {
		e, ok := n.models.m[node]
		return ok && e.model == m
	})
	return n
}

// sameSet reports whether a and b, lists without duplicates, hold the
// same objects in any order (see sameObject). The common case, the very
// same pointers, is checked first without a map.
func sameSet[T object](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) <= 16 && !slices.ContainsFunc(a, func(x T) bool { return !slices.Contains(b, x) }) {
		return true
	}
	byUID := make(map[types.UID]T, len(b))
	for _, y := range b {
		byUID[y.GetUID()] = y
	}
	for _, x := range a {
		if y, ok := byUID[x.GetUID()]; !ok || !sameObject(x, y) {
			return false
		}
	}
	return true
}

// sameObjects reports whether a and b hold the same objects in the same
// order (see sameObject).
func sameObjects[T object](a, b []T) bool {
	return slices.EqualFunc(a, b, sameObject)
}

// object is a pointer to an API object.
type object interface {
	comparable
	metav1.Object
}

// sameObject reports whether a and b are one object unchanged: the same
// pointer, or the same UID and non-empty resourceVersion (as after an
// informer's relist).
func sameObject[T object](a, b T) bool {
	var none T
	if a == b {
		return true
	}
	if a == none || b == none {
		return false
	}
	return a.GetResourceVersion() != "" && a.GetUID() != "" && a.GetUID() == b.GetUID() &&
		a.GetResourceVersion() == b.GetResourceVersion()
}

func claimKey(c *resourceapi.ResourceClaim) string { return c.Namespace + "/" + c.Name }

// resolve finds the class and parameters of a claim. It returns what is
// missing (for a Wait) as a non-empty string, the class before the
// claim's parameters before the class's, and the reason code for it.
// Claims of classes with a controller do not get here (see controlPlane).
func (o *Objects) resolve(claim *resourceapi.ResourceClaim) (allocator.Claim, string, allocator.ReasonCode) {
	c, missing := o.catalog.Resolve(claim)
	if len(missing) == 0 {
		return c, "", ""
	}
	switch m := missing[0]; m.Kind {
	case allocator.MissingClass:
		return c, fmt.Sprintf("resource class %s of claim %s", m.Class, m.Claim), allocator.ReasonClassNotFound
	case allocator.MissingClaimParameters:
		return c, fmt.Sprintf("ResourceClaimParameters for %s %s of claim %s", m.RefKind, m.RefName, m.Claim), allocator.ReasonParametersNotFound
	default:
		return c, fmt.Sprintf("ResourceClassParameters for %s %s of class %s", m.RefKind, m.RefName, m.Class), allocator.ReasonParametersNotFound
	}
}

// maxRevision returns the larger of two resourceVersions ("" is 0).
func maxRevision(a, b string) string {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	if y > x {
		x = y
	}
	return strconv.FormatUint(x, 10)
}

// ServesExtendedResource reports whether a DeviceClass maps the extended
// resource name (allocator.Catalog.ExtendedResourceClass): NodeResourcesFit
// leaves such a name to this plugin on nodes whose allocatable lacks it.
func (o *Objects) ServesExtendedResource(name corev1.ResourceName) bool {
	return o != nil && o.catalog.ExtendedResourceClass(string(name)) != nil
}
