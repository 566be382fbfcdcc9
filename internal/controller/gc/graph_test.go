package gc

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	podsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	claimsGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1alpha2", Resource: "resourceclaims"}
)

// objBuilder builds the metadata of a graph test object; its uid is its name.
type objBuilder struct {
	gvr schema.GroupVersionResource
	m   metav1.ObjectMeta
}

func obj(name string) *objBuilder {
	return &objBuilder{gvr: podsGVR, m: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
}

func (b *objBuilder) in(gvr schema.GroupVersionResource) *objBuilder { b.gvr = gvr; return b }

func (b *objBuilder) owner(uid string) *objBuilder {
	b.m.OwnerReferences = append(b.m.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: uid, UID: types.UID(uid)})
	return b
}

func (b *objBuilder) blockingOwner(uid string) *objBuilder {
	yes := true
	b.owner(uid)
	b.m.OwnerReferences[len(b.m.OwnerReferences)-1].BlockOwnerDeletion = &yes
	return b
}

func (b *objBuilder) deleting(finalizers ...string) *objBuilder {
	now := metav1.Now()
	b.m.DeletionTimestamp = &now
	b.m.Finalizers = finalizers
	return b
}

func (b *objBuilder) ref() objectRef {
	return objectRef{GVR: b.gvr, Namespace: b.m.Namespace, Name: b.m.Name, UID: b.m.UID}
}

// step is one event: an observation of obj, or the removal of remove.
type step struct {
	obj    *objBuilder
	remove string
}

func apply(g *graph, s step) work {
	if s.obj != nil {
		return g.observe(s.obj.ref(), &s.obj.m)
	}
	return g.remove(types.UID(s.remove))
}

// names renders queued refs as sorted names for comparison.
func names(refs []objectRef) string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestGraphWork(t *testing.T) {
	tests := map[string]struct {
		steps      []step // the work of the last one is compared
		wantCheck  string
		wantOrphan string
	}{
		"dependent of an unobserved owner is checked": {
			steps:     []step{{obj: obj("a").owner("x")}},
			wantCheck: "a",
		},
		"dependent of an observed owner needs nothing": {
			steps: []step{{obj: obj("x")}, {obj: obj("a").owner("x")}},
		},
		"dependent of an owner with a deletionTimestamp is checked": {
			steps:     []step{{obj: obj("x").deleting("example.com/hold")}, {obj: obj("a").owner("x")}},
			wantCheck: "a",
		},
		"removed owner: its dependents are checked": {
			steps:     []step{{obj: obj("x")}, {obj: obj("a").owner("x")}, {obj: obj("b").owner("x").owner("y")}, {remove: "x"}},
			wantCheck: "a,b",
		},
		"object without owners or deletion needs nothing": {
			steps: []step{{obj: obj("x")}},
		},
		"owner in foreground deletion is checked": {
			steps:     []step{{obj: obj("x").deleting(finalizerForeground)}},
			wantCheck: "x",
		},
		"owner with orphan finalizer is orphaned": {
			steps:      []step{{obj: obj("x").deleting(finalizerOrphan)}},
			wantOrphan: "x",
		},
		"finalizers without deletionTimestamp are not acted on": {
			steps: []step{{obj: func() *objBuilder { b := obj("x"); b.m.Finalizers = []string{finalizerOrphan}; return b }()}},
		},
		"removed dependent brings back its foreground owner": {
			steps:     []step{{obj: obj("x").deleting(finalizerForeground)}, {obj: obj("a").owner("x")}, {remove: "a"}},
			wantCheck: "x",
		},
		"dropped reference brings back its foreground owner": {
			steps:     []step{{obj: obj("x").deleting(finalizerForeground)}, {obj: obj("a").owner("x").owner("y")}, {obj: obj("a").owner("y")}},
			wantCheck: "a,x",
		},
		"removing an unknown object needs nothing": {
			steps: []step{{remove: "nothing"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newGraph()
			var w work
			for _, s := range tc.steps {
				w = apply(g, s)
			}
			if got := names(w.check); got != tc.wantCheck {
				t.Errorf("check = %q, want %q", got, tc.wantCheck)
			}
			if got := names(w.orphan); got != tc.wantOrphan {
				t.Errorf("orphan = %q, want %q", got, tc.wantOrphan)
			}
		})
	}
}

func TestGraphDependents(t *testing.T) {
	g := newGraph()
	g.observe(obj("x").ref(), &obj("x").m)
	for _, b := range []*objBuilder{obj("a").blockingOwner("x"), obj("b").owner("x").deleting("example.com/hold"), obj("c").owner("y")} {
		g.observe(b.ref(), &b.m)
	}
	deps := g.dependentsOf("x")
	slices.SortFunc(deps, func(a, b dependent) int { return strings.Compare(a.ref.Name, b.ref.Name) })
	want := []dependent{{ref: obj("a").ref(), blocking: true}, {ref: obj("b").ref(), deleting: true}}
	if !slices.Equal(deps, want) {
		t.Errorf("dependentsOf(x) = %+v, want %+v", deps, want)
	}
	if !g.hasDependents("y") || g.hasDependents("a") {
		t.Errorf("hasDependents(y) = %v, hasDependents(a) = %v; want true, false", g.hasDependents("y"), g.hasDependents("a"))
	}
	if !g.settled("a") || g.settled("c") || g.settled("b") {
		t.Errorf("settled(a, c, b) = %v, %v, %v; want true, false, false", g.settled("a"), g.settled("c"), g.settled("b"))
	}
	g.observe(obj("a").ref(), &obj("a").m) // a drops its reference
	if got := names(refsOf(g.dependentsOf("x"))); got != "b" {
		t.Errorf("after a dropped its reference, dependentsOf(x) = %q, want %q", got, "b")
	}
}

func TestGraphRemoveResource(t *testing.T) {
	g := newGraph()
	x := obj("x").in(claimsGVR)
	g.observe(x.ref(), &x.m)
	a := obj("a").owner("x")
	g.observe(a.ref(), &a.m)
	w := g.removeResource(claimsGVR)
	if got := names(w.check); got != "a" {
		t.Errorf("check = %q, want %q", got, "a")
	}
	if g.present("x") || !g.present("a") {
		t.Errorf("present(x, a) = %v, %v; want false, true", g.present("x"), g.present("a"))
	}
}

func refsOf(deps []dependent) []objectRef {
	var out []objectRef
	for _, d := range deps {
		out = append(out, d.ref)
	}
	return out
}
