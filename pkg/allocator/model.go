package allocator

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
)

// maxDepth bounds the nesting of partitions (instances below instances).
// Deeper subtrees are dropped with a Problem.
const maxDepth = 32

// Model is the compiled view of everything one node publishes: its
// NodeResourceSlices, per driver, as partition trees with effective
// attributes. It is immutable after NewModel and safe for concurrent use;
// build it once per slice change and share it.
type Model struct {
	node     string
	drivers  map[string]*driverModel
	problems []Problem
	// v1 is the model's v1 projection (seedNodePools), computed once: every
	// inventory built over the same Model shares it.
	v1 atomic.Pointer[seedProjection]
}

// Problem is a defect in a slice that made part of it unusable. Defective
// instances are never allocated: a wrong allocation is worse than none.
type Problem struct {
	Slice   string
	Driver  string
	Path    string // instance or group ID; empty for the whole slice
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return fmt.Sprintf("slice %s (driver %s): %s", p.Slice, p.Driver, p.Message)
	}
	return fmt.Sprintf("slice %s (driver %s) %s: %s", p.Slice, p.Driver, p.Path, p.Message)
}

// driverModel is one driver's forest on one node, flattened into arrays.
type driverModel struct {
	driver    string
	schemeKey string // engine.SchemeKey(driver, node): its entry in the one state
	insts     []instNode
	groups    []groupNode
	roots     []int32
	leaves    []int32 // instances without partitions, in listing order
	byID      map[string]int32
	groupByID map[string]int32
	matches   memo[[]outcome]            // per kind key: the outcome on each leaf
	explained memo[explanation]          // per kind key and class: why nothing matches
	seed      atomic.Pointer[seedLayout] // see layout
}

type instNode struct {
	id     string
	parent int32 // enclosing partition group; -1 for a root
	groups []int32
	root   int32
	leaf   int32 // index into leaves, or -1
	ok     bool  // healthy and well-formed, and so are all its ancestors, and not tainted
	vars   *attrVars
	// taints are the DeviceTaintRules' taints on a leaf (NewModelTainted);
	// tainted says that one of them keeps the leaf from seed claims,
	// which tolerate none (ok is false then, for that reason alone).
	taints  []DeviceRuleTaint
	tainted bool
}

type groupNode struct {
	id       string
	owner    int32
	children []int32
}

// NewModel compiles the slices of one node. Slices of other nodes and
// slices without a known model are skipped and reported as Problems, as are
// malformed parts; the rest is usable.
func NewModel(nodeName string, slices []*resourceapi.NodeResourceSlice) *Model {
	m := &Model{node: nodeName, drivers: map[string]*driverModel{}}
	sorted := append([]*resourceapi.NodeResourceSlice(nil), slices...)
	slicesSortByName(sorted)
	for _, s := range sorted {
		if s == nil {
			continue
		}
		p := Problem{Slice: s.Name, Driver: s.Spec.DriverName}
		switch {
		case s.Spec.NodeName != nodeName:
			p.Message = fmt.Sprintf("belongs to node %q", s.Spec.NodeName)
		case s.Spec.Partitionable == nil:
			p.Message = "has no model this allocator knows (partitionable)"
		}
		if p.Message != "" {
			m.problems = append(m.problems, p)
			continue
		}
		dm := m.drivers[s.Spec.DriverName]
		if dm == nil {
			dm = &driverModel{driver: s.Spec.DriverName, schemeKey: engine.SchemeKey(s.Spec.DriverName, nodeName),
				byID: map[string]int32{}, groupByID: map[string]int32{}}
			m.drivers[s.Spec.DriverName] = dm
		}
		b := &builder{dm: dm, slice: s.Name, groups: map[string][]resourceapi.Attribute{}}
		for _, g := range s.Spec.Partitionable.CommonAttributes {
			if _, dup := b.groups[g.Name]; dup {
				b.problem("", fmt.Sprintf("attribute group %q is defined twice; the first wins", g.Name))
				continue
			}
			b.groups[g.Name] = g.Attributes
		}
		for i := range s.Spec.Partitionable.ResourceInstances {
			b.addInstance(&s.Spec.Partitionable.ResourceInstances[i], -1, nil, attrSet{}, true, 0)
		}
		m.problems = append(m.problems, b.problems...)
	}
	return m
}

func slicesSortByName(s []*resourceapi.NodeResourceSlice) {
	slices.SortStableFunc(s, func(a, b *resourceapi.NodeResourceSlice) int {
		if a == nil || b == nil {
			return 0
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// NodeName is the node the model describes.
func (m *Model) NodeName() string { return m.node }

// Problems lists the defects found while compiling the slices.
func (m *Model) Problems() []Problem { return m.problems }

// Drivers lists the drivers with resources on the node, sorted.
func (m *Model) Drivers() []string {
	out := make([]string, 0, len(m.drivers))
	for d := range m.drivers {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Instances lists the IDs of a driver's allocatable-shaped instances (those
// without partitions) in listing order, with whether each is usable
// (healthy and well-formed).
func (m *Model) Instances(driver string) (ids []string, usable []bool) {
	dm := m.drivers[driver]
	if dm == nil {
		return nil, nil
	}
	for _, l := range dm.leaves {
		ids = append(ids, dm.insts[l].id)
		usable = append(usable, dm.insts[l].ok)
	}
	return ids, usable
}

type builder struct {
	dm       *driverModel
	slice    string
	groups   map[string][]resourceapi.Attribute
	problems []Problem
}

func (b *builder) problem(path, msg string) {
	b.problems = append(b.problems, Problem{Slice: b.slice, Driver: b.dm.driver, Path: path, Message: msg})
}

// addInstance adds ri below the partition group parent (-1: a root).
// inherited holds the effective attributes of the parent instance plus the
// group's references; ok is false below a defective or unhealthy ancestor.
func (b *builder) addInstance(ri *resourceapi.ResourceInstance, parent int32, groupRefs []string,
	inherited attrSet, ok bool, depth int) {
	dm := b.dm
	id := ri.Name
	if parent >= 0 {
		id = dm.groups[parent].id + "/" + ri.Name
	}
	if msg := checkName(ri.Name); msg != "" {
		b.problem(id, "instance "+msg)
		return
	}
	if _, dup := dm.byID[id]; dup {
		b.problem(id, "duplicate instance ID; the first wins")
		return
	}
	if depth >= maxDepth {
		b.problem(id, fmt.Sprintf("partitions nested deeper than %d levels", maxDepth))
		return
	}
	eff := inherited.clone()
	for _, refs := range [][]string{groupRefs, ri.CommonAttributesRefs} {
		for _, r := range refs {
			attrs, found := b.groups[r]
			if !found {
				b.problem(id, fmt.Sprintf("unknown attribute group %q", r))
				ok = false
				continue
			}
			eff.add(attrs)
		}
	}
	eff.add(ri.Attributes)
	if ri.Health != "" && ri.Health != resourceapi.InstanceHealthy {
		ok = false
	}
	idx := int32(len(dm.insts))
	root := idx
	if parent >= 0 {
		root = dm.insts[dm.groups[parent].owner].root
	}
	dm.insts = append(dm.insts, instNode{id: id, parent: parent, root: root, leaf: -1, ok: ok})
	dm.byID[id] = idx
	if parent < 0 {
		dm.roots = append(dm.roots, idx)
	} else {
		dm.groups[parent].children = append(dm.groups[parent].children, idx)
	}
	if len(ri.Partitions) == 0 {
		b.finishLeaf(idx, eff)
		return
	}
	for gi := range ri.Partitions {
		g := &ri.Partitions[gi]
		gid := id + "/" + g.Name
		if msg := checkName(g.Name); msg != "" {
			b.problem(gid, "partition group "+msg)
			continue
		}
		if _, dup := dm.groupByID[gid]; dup {
			b.problem(gid, "duplicate partition group; the first wins")
			continue
		}
		gIdx := int32(len(dm.groups))
		dm.groups = append(dm.groups, groupNode{id: gid, owner: idx})
		dm.groupByID[gid] = gIdx
		dm.insts[idx].groups = append(dm.insts[idx].groups, gIdx)
		for ci := range g.ResourceInstances {
			b.addInstance(&g.ResourceInstances[ci], gIdx, g.CommonAttributesRefs, eff, ok, depth+1)
		}
	}
}

func (b *builder) finishLeaf(idx int32, eff attrSet) {
	dm := b.dm
	in := &dm.insts[idx]
	in.leaf = int32(len(dm.leaves))
	dm.leaves = append(dm.leaves, idx)
	vars, err := newAttrVars(eff)
	if err != nil {
		b.problem(in.id, err.Error())
		in.ok = false
		vars, _ = newAttrVars(attrSet{})
	}
	in.vars = vars
}

// checkName returns why a name cannot be part of an instance ID, or "".
func checkName(name string) string {
	switch {
	case name == "":
		return "has an empty name"
	case strings.Contains(name, "/"):
		return fmt.Sprintf("name %q contains \"/\"", name)
	}
	return ""
}

// memo remembers, per predicate, what a driver model says of it: which
// leaves pass it, or why none does. Selectors depend only on attributes,
// which never change in a Model, so repeated pods with the same parameters
// skip CEL entirely. It is cleared when full.
type memo[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

const memoMax = 256

func (c *memo[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memo[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= memoMax {
		c.m = map[string]V{}
	}
	c.m[key] = v
}
