package allocator

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/internal/layered"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClaimSet is an immutable version of a cluster's ResourceClaims: by
// namespace/name, the claims generated for pods' template entries by
// podUID/entry (GeneratedKey), and the claims allocated on each node by
// their structured handles; and the claims stored as resource.k8s.io/v1,
// by namespace/name and by the entry they were generated for
// (V1Claim, GeneratedV1). Update derives the version that follows a
// batch of claim events at the cost of the events, sharing the rest
// (copy-on-write); the versions derived that way form an ancestry that
// says which nodes' allocated claims changed since an earlier version,
// so that answers computed on an earlier version can be told apart from
// stale ones (the scheduler's answer reuse). A ClaimSet is safe for
// concurrent use; nothing in it may be modified.
type ClaimSet struct {
	claims    *layered.Map[string, *resourceapi.ResourceClaim] // namespace/name
	generated *layered.Map[string, string]                     // podUID/entry -> name of the claim generated for it
	// nodes have an entry in allocated even without claims.
	nodes map[string][]*resourceapi.NodeResourceSlice

	v1          *layered.Map[string, *resourcev1.ResourceClaim] // namespace/name
	v1generated *layered.Map[string, string]                    // podUID/entry -> name

	once      sync.Once
	allocated *layered.Map[string, *NodeClaims] // by node with slices or structured handles; see Allocated

	// gen names this ClaimSet among all. parent is the set Update derived
	// it from, and touched the nodes whose allocated claims differ from
	// parent's; a new link cuts the chain MaxAncestry links back, so that
	// it keeps few sets alive.
	gen       uint64
	parent    atomic.Pointer[ClaimSet]
	touched   []string
	touchedAt atomic.Pointer[[]int] // positions of touched in the last nodes asked about (see TouchedIn)

	// touchedAll: the link changed allocations that may matter on any
	// node (devices of a pool that is not local to one node).
	touchedAll bool
}

// MaxAncestry is how many ClaimSets a chain of Update keeps.
const MaxAncestry = 16

// claimSetGen numbers ClaimSets.
var claimSetGen atomic.Uint64

// NodeClaims are the claims allocated on one node, by their structured
// handles, in no particular order. A ClaimSet derived by Update shares
// the entries of the nodes whose claims did not change.
type NodeClaims struct {
	Claims []*resourceapi.ResourceClaim
}

// NewClaimSet indexes claims, and the claims stored as
// resource.k8s.io/v1. nodes are the slices by node: every node there has
// an entry in the allocated index (Allocated), claims or not. Nothing is
// copied; callers must not modify them afterwards.
func NewClaimSet(claims []*resourceapi.ResourceClaim, nodes map[string][]*resourceapi.NodeResourceSlice, v1Claims ...*resourcev1.ResourceClaim) *ClaimSet {
	byKey := make(map[string]*resourceapi.ResourceClaim, len(claims))
	generated := map[string]string{}
	for _, c := range claims {
		byKey[claimKey(c)] = c
		if k := GeneratedKey(c); k != "" {
			generated[k] = c.Name
		}
	}
	v1 := make(map[string]*resourcev1.ResourceClaim, len(v1Claims))
	v1generated := map[string]string{}
	for _, c := range v1Claims {
		v1[c.Namespace+"/"+c.Name] = c
		if k := GeneratedKeyV1(c); k != "" {
			v1generated[k] = c.Name
		}
	}
	return &ClaimSet{claims: layered.New(byKey), generated: layered.New(generated), nodes: nodes, gen: claimSetGen.Add(1),
		v1: layered.New(v1), v1generated: layered.New(v1generated)}
}

// Gen numbers s among all ClaimSets of the process.
func (s *ClaimSet) Gen() uint64 { return s.gen }

// Parent is the set Update derived s from, while the ancestry keeps it.
func (s *ClaimSet) Parent() *ClaimSet { return s.parent.Load() }

// Touched lists the nodes whose allocated claims differ from Parent's.
func (s *ClaimSet) Touched() []string { return s.touched }

// TouchedAll reports whether the events that derived s from Parent
// changed allocations that may matter on any node (Touch.All).
func (s *ClaimSet) TouchedAll() bool { return s.touchedAll }

// Get returns the claim of key namespace/name.
func (s *ClaimSet) Get(key string) (*resourceapi.ResourceClaim, bool) { return s.claims.Get(key) }

// Claim returns the claim namespace/name.
func (s *ClaimSet) Claim(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	return s.claims.Get(namespace + "/" + name)
}

// Len is the number of claims.
func (s *ClaimSet) Len() int { return s.claims.Len() }

// Claims returns every claim, sorted by namespace and name.
func (s *ClaimSet) Claims() []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, 0, s.claims.Len())
	s.claims.Each(func(_ string, c *resourceapi.ResourceClaim) { out = append(out, c) })
	slices.SortFunc(out, func(a, b *resourceapi.ResourceClaim) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Generated returns the name of the claim generated for the entry of the
// pod with that UID (resourceapi.GeneratedFor), if there is one.
func (s *ClaimSet) Generated(podUID types.UID, entry string) (string, bool) {
	return s.generated.Get(EntryKey(podUID, entry))
}

// V1Claim returns the resource.k8s.io/v1 claim of key namespace/name.
func (s *ClaimSet) V1Claim(key string) (*resourcev1.ResourceClaim, bool) { return s.v1.Get(key) }

// V1Len is the number of resource.k8s.io/v1 claims.
func (s *ClaimSet) V1Len() int { return s.v1.Len() }

// V1Claims returns every resource.k8s.io/v1 claim, sorted by namespace and
// name.
func (s *ClaimSet) V1Claims() []*resourcev1.ResourceClaim {
	out := make([]*resourcev1.ResourceClaim, 0, s.v1.Len())
	s.v1.Each(func(_ string, c *resourcev1.ResourceClaim) { out = append(out, c) })
	slices.SortFunc(out, func(a, b *resourcev1.ResourceClaim) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// GeneratedV1 returns the name of the resource.k8s.io/v1 claim generated
// for the entry of the pod with that UID, if there is one.
func (s *ClaimSet) GeneratedV1(podUID types.UID, entry string) (string, bool) {
	return s.v1generated.Get(EntryKey(podUID, entry))
}

// Allocated returns the claims allocated on node, nil when there are
// none and the node has no slices.
func (s *ClaimSet) Allocated(node string) *NodeClaims {
	s.once.Do(s.indexAllocated)
	nc, _ := s.allocated.Get(node)
	return nc
}

// With returns the set in which claims replace (or add to) those of s,
// as a simulation records a binding. It starts a new ancestry.
func (s *ClaimSet) With(claims ...*resourceapi.ResourceClaim) *ClaimSet {
	set := make(map[string]*resourceapi.ResourceClaim, len(claims))
	for _, c := range claims {
		set[claimKey(c)] = c
	}
	return &ClaimSet{claims: s.claims.With(set, nil), generated: s.generatedWith(set, nil), nodes: s.nodes, gen: claimSetGen.Add(1),
		v1: s.v1, v1generated: s.v1generated}
}

// Update returns the set that follows s after claim events: upd maps
// namespace/name to the claim's current version, nil for a deleted
// claim. The claims allocated per node are updated for the claims that
// changed instead of indexed again, and the result's Parent is s.
func (s *ClaimSet) Update(upd map[string]*resourceapi.ResourceClaim) *ClaimSet {
	return s.UpdateTouching(upd, nil, Touch{})
}

// Touch is what a batch of claim events changed that the structured
// handles of the v1alpha2 claims do not show (resource.k8s.io/v1
// claims): the nodes whose allocations changed, or all of them.
type Touch struct {
	Nodes []string
	// All: allocations changed that may matter on any node, such as
	// devices of a pool that is not local to one node.
	All bool
}

// UpdateTouching is Update with the resource.k8s.io/v1 claim events too
// (updV1, likewise by namespace/name, nil for a deleted claim), and it
// also counts touch among what the result touched (Touched,
// TouchedAll), so that what reads the ancestry (a scheduler's answer
// reuse) sees those nodes change.
func (s *ClaimSet) UpdateTouching(upd map[string]*resourceapi.ResourceClaim, updV1 map[string]*resourcev1.ResourceClaim, touch Touch) *ClaimSet {
	s.once.Do(s.indexAllocated)
	out := &ClaimSet{nodes: s.nodes, gen: claimSetGen.Add(1), touchedAll: touch.All}
	out.v1, out.v1generated = s.v1WithChanges(updV1)
	// Per node touched: the claims that leave its list and those that join.
	type change struct{ drop, add []*resourceapi.ResourceClaim }
	touched := map[string]*change{}
	at := func(node string) *change {
		c := touched[node]
		if c == nil {
			c = &change{}
			touched[node] = c
		}
		return c
	}
	setClaims := make(map[string]*resourceapi.ResourceClaim, len(upd))
	var delClaims []string
	for k, c := range upd {
		if old, ok := s.claims.Get(k); ok {
			for _, n := range AllocatedNodes(old) {
				at(n).drop = append(at(n).drop, old)
			}
		}
		if c == nil {
			delClaims = append(delClaims, k)
			continue
		}
		setClaims[k] = c
		for _, n := range AllocatedNodes(c) {
			at(n).add = append(at(n).add, c)
		}
	}
	for _, n := range touch.Nodes {
		at(n)
	}
	out.claims = s.claims.With(setClaims, delClaims)
	out.generated = s.generatedWith(setClaims, delClaims)
	setNodes := make(map[string]*NodeClaims, len(touched))
	var delNodes []string
	for n, c := range touched {
		var prev []*resourceapi.ResourceClaim
		if e, ok := s.allocated.Get(n); ok {
			prev = e.Claims
		}
		list := make([]*resourceapi.ResourceClaim, 0, len(prev)+len(c.add))
		for _, x := range prev {
			if !slices.Contains(c.drop, x) {
				list = append(list, x)
			}
		}
		list = append(list, c.add...)
		if _, kept := s.nodes[n]; len(list) == 0 && !kept {
			delNodes = append(delNodes, n)
			continue
		}
		setNodes[n] = &NodeClaims{Claims: list}
	}
	out.allocated = s.allocated.With(setNodes, delNodes)
	out.once.Do(func() {})
	out.parent.Store(s)
	for n := range touched {
		out.touched = append(out.touched, n)
	}
	a := s
	for range MaxAncestry - 2 {
		if a = a.parent.Load(); a == nil {
			break
		}
	}
	if a != nil {
		a.parent.Store(nil)
	}
	return out
}

// NodeIndex is an ordered list of node names, such as a scheduler's
// snapshot.
type NodeIndex interface {
	Len() int
	NodeName(i int) string
	Index(name string) (int, bool)
}

// TouchedIn returns the positions in nodes of the nodes s touched (in
// the order of Touched), -1 for those nodes does not have. A chain's sets
// are asked about by the next cycles, whose nodes are at the same
// positions: that costs a comparison of names per node instead of a
// search.
func (s *ClaimSet) TouchedIn(nodes NodeIndex) []int {
	if p := s.touchedAt.Load(); p != nil {
		ok := true
		n := nodes.Len()
		for j, i := range *p {
			if i >= n || (i >= 0 && nodes.NodeName(i) != s.touched[j]) {
				ok = false
				break
			}
		}
		// A touched node absent then (-1) may have been added since:
		// look for it again.
		if ok && !slices.ContainsFunc(*p, func(i int) bool { return i < 0 }) {
			return *p
		}
	}
	pos := make([]int, len(s.touched))
	for j, name := range s.touched {
		pos[j] = -1
		if i, ok := nodes.Index(name); ok {
			pos[j] = i
		}
	}
	s.touchedAt.Store(&pos)
	return pos
}

// indexAllocated lists the claims allocated on each node. It runs for
// every snapshot, so it avoids per-claim allocations.
func (s *ClaimSet) indexAllocated() {
	allocated := make(map[string]*NodeClaims, len(s.nodes))
	for n := range s.nodes {
		allocated[n] = &NodeClaims{}
	}
	s.claims.Each(func(_ string, c *resourceapi.ResourceClaim) {
		if c.Status.Allocation == nil {
			return
		}
		hs := c.Status.Allocation.ResourceHandles
		for i, h := range hs {
			if h.StructuredData == nil || onNodeBefore(hs[:i], h.StructuredData.NodeName) {
				continue
			}
			e := allocated[h.StructuredData.NodeName]
			if e == nil {
				e = &NodeClaims{}
				allocated[h.StructuredData.NodeName] = e
			}
			e.Claims = append(e.Claims, c)
		}
	})
	s.allocated = layered.New(allocated)
}

// onNodeBefore reports whether one of hs is a structured handle on node.
func onNodeBefore(hs []resourceapi.ResourceHandle, node string) bool {
	for _, h := range hs {
		if h.StructuredData != nil && h.StructuredData.NodeName == node {
			return true
		}
	}
	return false
}

// generatedWith is s.generated after the claims set are set and the
// claims del (namespace/name) deleted.
func (s *ClaimSet) generatedWith(set map[string]*resourceapi.ResourceClaim, del []string) *layered.Map[string, string] {
	put := map[string]string{}
	var drop []string
	forget := func(key string) {
		if old, ok := s.claims.Get(key); ok {
			if k := GeneratedKey(old); k != "" {
				if name, _ := s.generated.Get(k); name == old.Name {
					drop = append(drop, k)
				}
			}
		}
	}
	for key, c := range set {
		forget(key)
		if k := GeneratedKey(c); k != "" {
			put[k] = c.Name
		}
	}
	for _, key := range del {
		forget(key)
	}
	if len(put) == 0 && len(drop) == 0 {
		return s.generated
	}
	drop = slices.DeleteFunc(drop, func(k string) bool { _, again := put[k]; return again })
	return s.generated.With(put, drop)
}

// v1WithChanges is s's v1 claims and their generated index after the
// v1 claim events upd.
func (s *ClaimSet) v1WithChanges(upd map[string]*resourcev1.ResourceClaim) (*layered.Map[string, *resourcev1.ResourceClaim], *layered.Map[string, string]) {
	if len(upd) == 0 {
		return s.v1, s.v1generated
	}
	set := map[string]*resourcev1.ResourceClaim{}
	var del []string
	put := map[string]string{}
	var drop []string
	for key, c := range upd {
		if old, ok := s.v1.Get(key); ok {
			if k := GeneratedKeyV1(old); k != "" {
				if name, _ := s.v1generated.Get(k); name == old.Name {
					drop = append(drop, k)
				}
			}
		}
		if c == nil {
			del = append(del, key)
			continue
		}
		set[key] = c
		if k := GeneratedKeyV1(c); k != "" {
			put[k] = c.Name
		}
	}
	drop = slices.DeleteFunc(drop, func(k string) bool { _, again := put[k]; return again })
	return s.v1.With(set, del), s.v1generated.With(put, drop)
}

// GeneratedKeyV1 is GeneratedKey for a resource.k8s.io/v1 claim (the same
// owner reference and annotation).
func GeneratedKeyV1(c *resourcev1.ResourceClaim) string {
	if c.DeletionTimestamp != nil {
		return ""
	}
	uid, entry, ok := resourceapi.GeneratedFor(&resourceapi.ResourceClaim{ObjectMeta: c.ObjectMeta})
	if !ok {
		return ""
	}
	return EntryKey(uid, entry)
}

// GeneratedKey is "podUID/entry" of the pod and entry a claim was
// generated for (resourceapi.GeneratedFor); "" for other claims and claims
// being deleted (the claim controller generates a new one). ClaimSet and
// the scheduler's claim informer index generated claims by it.
func GeneratedKey(c *resourceapi.ResourceClaim) string {
	uid, entry, ok := resourceapi.GeneratedFor(c)
	if !ok || c.DeletionTimestamp != nil {
		return ""
	}
	return EntryKey(uid, entry)
}

// EntryKey is the GeneratedKey of the claims generated for a pod's entry.
func EntryKey(podUID types.UID, entry string) string { return string(podUID) + "/" + entry }

// AllocatedNodes lists the nodes named by a claim's structured handles.
func AllocatedNodes(c *resourceapi.ResourceClaim) []string {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, h := range c.Status.Allocation.ResourceHandles {
		if h.StructuredData != nil && !slices.Contains(out, h.StructuredData.NodeName) {
			out = append(out, h.StructuredData.NodeName)
		}
	}
	return out
}
