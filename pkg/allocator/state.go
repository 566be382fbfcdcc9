package allocator

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// NodeState is a node's Model together with what is already allocated on
// it. It is immutable: WithAllocated and WithoutAllocated return new states
// that share unchanged parts, so a scheduler cycle or a simulation can keep
// many of them cheaply.
type NodeState struct {
	model   *Model
	node    *corev1.Node
	drivers map[string]*driverState // drivers with no entry have nothing allocated

	capOnce  sync.Once
	capTotal int

	memo atomic.Pointer[checkMemo] // see CheckReusing

	// from, for a state derived from the one device-use state
	// (State.SeedNodeState), is the entries of the node it was read
	// from, one per driver of the model: it answers for any State
	// whose entries of this node hold the same instance IDs, at once
	// when they are the same slices. Swapped for the slices of the last
	// state found to hold the same IDs. nil for any other state
	// (WithAllocated's results included).
	from atomic.Pointer[[]seedEntry]
}

// driverState counts allocations in one driver's forest.
type driverState struct {
	used []int32 // per instance: allocations of the instance itself
	lock []int32 // per partition group: allocations inside the group
}

// NewNodeState returns the state of a node with the given claims allocated.
// node may be nil; it is needed only for claims and classes whose node
// selectors look at labels. Claims are applied by the handles whose
// structuredData.nodeName is this node; others are ignored.
func NewNodeState(model *Model, node *corev1.Node, allocated []*resourceapi.ResourceClaim) *NodeState {
	s := &NodeState{model: model, node: node, drivers: map[string]*driverState{}}
	return s.apply(allocated, 1)
}

// SeedNodeState returns the seed front end's view of one node of the
// state: node's Model (its slices as the inventory projected them) with
// the seed instances that claims of both API versions hold on it, as
// NewNodeState counts v1alpha2 allocations. Only "in use" and "locked"
// matter to allocation, so a device held twice counts as it does here,
// once.
//
// prev are states this method returned earlier, nil ones skipped: the
// first of them derived for the same model and node object from the same
// instance IDs of the node is returned itself, so that caches keyed by a
// state's identity (CheckReusing's memo, a scheduler's per-node caches)
// keep answering for nodes whose allocations did not change, across
// states derived from one another (a few pointer comparisons: the state
// replaces an entry only when it changes) and states built afresh (the
// IDs compared once, then the prev state takes the new entries).
func (s *State) SeedNodeState(model *Model, node *corev1.Node, prev ...*NodeState) *NodeState {
	for _, p := range prev {
		if p != nil && p.model == model && p.node == node && s.holdsSeedEntries(p) {
			return p
		}
	}
	out := &NodeState{model: model, node: node, drivers: map[string]*driverState{}}
	from := make([]seedEntry, 0, len(model.drivers))
	for name, dm := range model.drivers {
		key := dm.schemeKey
		ids := s.SchemeInUse(key)
		from = append(from, seedEntry{key: key, ids: ids})
		if len(ids) == 0 {
			continue
		}
		ds := newDriverState(dm)
		for _, id := range ids {
			groups, in := dm.resolve(id)
			ds.add(groups, in, 1)
		}
		out.drivers[name] = ds
	}
	out.from.Store(&from)
	return out
}

// seedEntry is one entry of State.seedUsed as a NodeState was derived
// from it.
type seedEntry struct {
	key string   // SchemeKey(driver, node)
	ids []string // nil when none
}

// holdsSeedEntries reports whether the node's entries of s hold the
// instance IDs p was derived from. An entry is never modified in place (a
// change stores a new slice), so the same slices answer at once; other
// slices are compared as multisets, and when they hold the same IDs p
// takes them, so that the next check with s is quick again.
func (s *State) holdsSeedEntries(p *NodeState) bool {
	fp := p.from.Load()
	if fp == nil {
		return false
	}
	from := *fp
	same := true
	for _, e := range from {
		ids := s.SchemeInUse(e.key)
		if len(ids) != len(e.ids) {
			return false
		}
		if len(ids) > 0 && &ids[0] != &e.ids[0] {
			same = false
		}
	}
	if same {
		return true
	}
	now := make([]seedEntry, len(from))
	for i, e := range from {
		ids := s.SchemeInUse(e.key)
		if !sameIDs(ids, e.ids) {
			return false
		}
		now[i] = seedEntry{key: e.key, ids: ids}
	}
	p.from.Store(&now)
	return true
}

// sameIDs reports whether a and b, of equal length, hold the same IDs as
// multisets.
func sameIDs(a, b []string) bool {
	if slices.Equal(a, b) {
		return true
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Model returns the node's model.
func (s *NodeState) Model() *Model { return s.model }

// Node returns the node object, which may be nil.
func (s *NodeState) Node() *corev1.Node { return s.node }

// WithAllocated returns the state with the claims' allocations added.
func (s *NodeState) WithAllocated(claims ...*resourceapi.ResourceClaim) *NodeState {
	return s.apply(claims, 1)
}

// WithoutAllocated returns the state with the claims' allocations removed,
// releasing partition locks that no other allocation holds.
func (s *NodeState) WithoutAllocated(claims ...*resourceapi.ResourceClaim) *NodeState {
	return s.apply(claims, -1)
}

func (s *NodeState) apply(claims []*resourceapi.ResourceClaim, sign int32) *NodeState {
	out := &NodeState{model: s.model, node: s.node, drivers: make(map[string]*driverState, len(s.drivers))}
	for d, ds := range s.drivers {
		out.drivers[d] = ds
	}
	copied := map[string]bool{}
	for _, c := range claims {
		for _, h := range handlesOn(c, s.model.node) {
			dm := s.model.drivers[h.DriverName]
			if dm == nil {
				continue
			}
			ds := out.drivers[h.DriverName]
			switch {
			case ds == nil:
				ds = newDriverState(dm)
			case !copied[h.DriverName]:
				ds = ds.clone()
			}
			copied[h.DriverName] = true
			out.drivers[h.DriverName] = ds
			for _, inst := range h.StructuredData.Partitionable.Instances {
				groups, in := dm.resolve(inst.ID)
				ds.add(groups, in, sign)
			}
		}
	}
	return out
}

// handlesOn returns the structured handles of a claim's allocation that
// allocate instances on node.
func handlesOn(c *resourceapi.ResourceClaim, node string) []resourceapi.ResourceHandle {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	var out []resourceapi.ResourceHandle
	for _, h := range c.Status.Allocation.ResourceHandles {
		sd := h.StructuredData
		if sd == nil || sd.NodeName != node || sd.Partitionable == nil {
			continue
		}
		out = append(out, h)
	}
	return out
}

func newDriverState(dm *driverModel) *driverState {
	return &driverState{used: make([]int32, len(dm.insts)), lock: make([]int32, len(dm.groups))}
}

func (ds *driverState) clone() *driverState {
	return &driverState{used: append([]int32(nil), ds.used...), lock: append([]int32(nil), ds.lock...)}
}

func (ds *driverState) add(groups []int32, inst int32, sign int32) {
	for _, g := range groups {
		ds.lock[g] = max(ds.lock[g]+sign, 0)
	}
	if inst >= 0 {
		ds.used[inst] = max(ds.used[inst]+sign, 0)
	}
}

// resolve maps an allocated instance ID to the partition groups on its path
// and the instance itself. IDs that the current model knows only in part
// (the driver changed its slice) are applied conservatively: a known prefix
// still locks its groups, and an instance whose named group is gone counts
// as used as a whole. An unknown root affects nothing.
func (dm *driverModel) resolve(id string) (groups []int32, inst int32) {
	comps := strings.Split(id, "/")
	cur, ok := dm.byID[comps[0]]
	if !ok {
		return nil, -1
	}
	for i := 1; ; i += 2 {
		if i >= len(comps) {
			return groups, cur
		}
		g, ok := dm.groupByID[dm.insts[cur].id+"/"+comps[i]]
		if !ok {
			return groups, cur
		}
		groups = append(groups, g)
		if i+1 >= len(comps) {
			return groups, -1
		}
		c, ok := dm.byID[dm.groups[g].id+"/"+comps[i+1]]
		if !ok {
			return groups, -1
		}
		cur = c
	}
}

// stateOf returns the driver's counts, or nil when nothing is allocated.
func (s *NodeState) stateOf(driver string) *driverState { return s.drivers[driver] }
