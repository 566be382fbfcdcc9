package gc

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Finalizers through which the API server hands deletions to the collector.
const (
	finalizerOrphan     = "orphan"
	finalizerForeground = "foregroundDeletion"
)

// objectRef identifies an observed object: the resource it was watched
// through, its name and its uid. It is the key of the work queues.
type objectRef struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
	UID       types.UID
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return r.GVR.Resource + "/" + r.Name + " (" + string(r.UID) + ")"
	}
	return r.GVR.Resource + "/" + r.Namespace + "/" + r.Name + " (" + string(r.UID) + ")"
}

// node is what the graph knows of one observed object.
type node struct {
	ref        objectRef
	owners     []metav1.OwnerReference
	deleting   bool // deletionTimestamp is set
	foreground bool // being deleted, waiting for its dependents
	orphan     bool // being deleted, its dependents to be orphaned
}

// dependent is one dependent of an owner, as the graph knows it.
type dependent struct {
	ref      objectRef
	deleting bool
	// blocking is set when the reference to the owner has
	// blockOwnerDeletion=true.
	blocking bool
}

// work is what an event asks of the workers.
type work struct {
	check  []objectRef
	orphan []objectRef
}

func (w *work) add(o work) {
	w.check = append(w.check, o.check...)
	w.orphan = append(w.orphan, o.orphan...)
}

// graph is the owner-reference graph of every observed object. It does no
// I/O: event handlers feed it and act on the work it returns; workers query
// it. It is safe for concurrent use.
type graph struct {
	mu    sync.Mutex
	nodes map[types.UID]*node
	// dependents maps an owner uid to the uids of the observed objects
	// that reference it. It is derived from the dependents' references
	// only, so it holds owners that were never observed too.
	dependents map[types.UID]map[types.UID]struct{}
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]struct{}{}}
}

func nodeOf(ref objectRef, m metav1.Object) *node {
	n := &node{ref: ref, owners: slices.Clone(m.GetOwnerReferences()), deleting: m.GetDeletionTimestamp() != nil}
	if n.deleting {
		n.foreground = slices.Contains(m.GetFinalizers(), finalizerForeground)
		n.orphan = slices.Contains(m.GetFinalizers(), finalizerOrphan)
	}
	return n
}

// observe records the current state of an object (an add, an update or a
// resync) and returns the work it calls for.
func (g *graph) observe(ref objectRef, m metav1.Object) work {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := nodeOf(ref, m)
	old := g.nodes[ref.UID]
	g.nodes[ref.UID] = n
	var w work
	if old != nil {
		for _, o := range old.owners {
			if !hasOwner(n.owners, o.UID) {
				g.unlink(o.UID, ref.UID)
				w.check = append(w.check, g.waitingOwner(o.UID)...)
			}
		}
	}
	for _, o := range n.owners {
		g.link(o.UID, ref.UID)
	}
	if g.needsOwnerCheck(n) || n.foreground {
		w.check = append(w.check, ref)
	}
	if n.orphan {
		w.orphan = append(w.orphan, ref)
	}
	return w
}

// remove forgets a deleted object and returns the work it calls for: its
// dependents lost an owner, and an owner in foreground deletion may be done.
func (g *graph) remove(uid types.UID) work {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.removeLocked(uid)
}

func (g *graph) removeLocked(uid types.UID) work {
	var w work
	n := g.nodes[uid]
	if n == nil {
		return w
	}
	delete(g.nodes, uid)
	for _, o := range n.owners {
		g.unlink(o.UID, uid)
		w.check = append(w.check, g.waitingOwner(o.UID)...)
	}
	for d := range g.dependents[uid] {
		if dn := g.nodes[d]; dn != nil {
			w.check = append(w.check, dn.ref)
		}
	}
	return w
}

// removeResource forgets every object watched through gvr (its monitor
// stopped) and returns the work that calls for.
func (g *graph) removeResource(gvr schema.GroupVersionResource) work {
	g.mu.Lock()
	defer g.mu.Unlock()
	var w work
	for uid, n := range g.nodes {
		if n.ref.GVR == gvr {
			w.add(g.removeLocked(uid))
		}
	}
	return w
}

// needsOwnerCheck is true when an owner of n is not observed or is being
// deleted: a worker must then judge n against the live owners.
func (g *graph) needsOwnerCheck(n *node) bool {
	for _, o := range n.owners {
		on := g.nodes[o.UID]
		if on == nil || on.deleting {
			return true
		}
	}
	return false
}

// waitingOwner returns the owner if it waits for its dependents.
func (g *graph) waitingOwner(uid types.UID) []objectRef {
	if on := g.nodes[uid]; on != nil && on.foreground {
		return []objectRef{on.ref}
	}
	return nil
}

func (g *graph) link(owner, dep types.UID) {
	set := g.dependents[owner]
	if set == nil {
		set = map[types.UID]struct{}{}
		g.dependents[owner] = set
	}
	set[dep] = struct{}{}
}

func (g *graph) unlink(owner, dep types.UID) {
	set := g.dependents[owner]
	delete(set, dep)
	if len(set) == 0 {
		delete(g.dependents, owner)
	}
}

// settled reports whether the object is observed, not being deleted, and
// every owner of it is observed and not being deleted: nothing to decide.
func (g *graph) settled(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	return n != nil && !n.deleting && !g.needsOwnerCheck(n)
}

// present reports whether an object is observed and not being deleted.
func (g *graph) present(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	return n != nil && !n.deleting
}

// dependentsOf lists the observed dependents of an owner.
func (g *graph) dependentsOf(owner types.UID) []dependent {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []dependent
	for d := range g.dependents[owner] {
		n := g.nodes[d]
		if n == nil {
			continue
		}
		dep := dependent{ref: n.ref, deleting: n.deleting}
		for _, o := range n.owners {
			if o.UID == owner && o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
				dep.blocking = true
			}
		}
		out = append(out, dep)
	}
	return out
}

// hasDependents reports whether any observed object references owner.
func (g *graph) hasDependents(owner types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.dependents[owner]) > 0
}

func hasOwner(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
}
