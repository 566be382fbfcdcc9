package allocator

import (
	"slices"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// names is a NodeIndex over a list of names.
type names []string

func (n names) Len() int              { return len(n) }
func (n names) NodeName(i int) string { return n[i] }
func (n names) Index(name string) (int, bool) {
	i := slices.Index(n, name)
	return i, i >= 0
}

func onNode(name, node string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{}
	c.Namespace, c.Name, c.ResourceVersion = "default", name, "2"
	c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{{
		DriverName: "d", StructuredData: &resourceapi.StructuredResourceHandle{NodeName: node}}}}
	return c
}

// TouchedIn finds the nodes an Update touched in each list of nodes, also
// when nodes before them came or went since it last looked.
func TestTouchedIn(t *testing.T) {
	s := NewClaimSet(nil, nil).Update(map[string]*resourceapi.ResourceClaim{
		"default/c-n2": onNode("c-n2", "n2"), "default/c-n4": onNode("c-n4", "n4"), "default/c-gone": onNode("c-gone", "gone")})
	for _, tc := range []struct {
		nodes names
		want  map[string]int
	}{
		{names{"n1", "n2", "n3", "n4"}, map[string]int{"n2": 1, "n4": 3, "gone": -1}},
		{names{"n1", "n2", "n3", "n4"}, map[string]int{"n2": 1, "n4": 3, "gone": -1}}, // as remembered
		{names{"n0", "n1", "n2", "n3", "n4"}, map[string]int{"n2": 2, "n4": 4, "gone": -1}},
		{names{"gone", "n2", "n4"}, map[string]int{"n2": 1, "n4": 2, "gone": 0}},
		{names{"n2", "n4"}, map[string]int{"n2": 0, "n4": 1, "gone": -1}},
		{names{"n2", "n4", "zz"}, map[string]int{"n2": 0, "n4": 1, "gone": -1}},
	} {
		got := s.TouchedIn(tc.nodes)
		for j, name := range s.Touched() {
			if got[j] != tc.want[name] {
				t.Errorf("nodes %v: %s at %d, want %d", tc.nodes, name, got[j], tc.want[name])
			}
		}
		if !slices.Equal(got, *s.touchedAt.Load()) {
			t.Errorf("nodes %v: positions not remembered", tc.nodes)
		}
	}
}

// TestClaimSetUpdate: Update keeps the allocated index and the generated
// index as indexing the new claims afresh gives them, links the ancestry
// and cuts it MaxAncestry back, and leaves earlier sets as they were.
func TestClaimSetUpdate(t *testing.T) {
	yes := true
	gen := func(c *resourceapi.ResourceClaim, uid string) *resourceapi.ResourceClaim {
		c.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: "gpu"}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: types.UID(uid), Controller: &yes}}
		return c
	}
	a, b := gen(onNode("a", "n1"), "u1"), onNode("b", "n2")
	s0 := NewClaimSet([]*resourceapi.ResourceClaim{a, b}, map[string][]*resourceapi.NodeResourceSlice{"n3": nil})
	if nc := s0.Allocated("n3"); nc == nil || len(nc.Claims) != 0 {
		t.Fatal("a node with slices and no claims has no entry")
	}
	b2 := onNode("b", "n1")
	s1 := s0.Update(map[string]*resourceapi.ResourceClaim{"default/a": nil, "default/b": b2})
	if got := s1.Allocated("n1").Claims; len(got) != 1 || got[0] != b2 {
		t.Fatalf("n1 after the update: %v", got)
	}
	if s1.Allocated("n2") != nil {
		t.Fatal("n2, without slices or claims, kept an entry")
	}
	if _, ok := s1.Generated("u1", "gpu"); ok {
		t.Fatal("the generated claim of a deleted claim is still indexed")
	}
	if name, _ := s0.Generated("u1", "gpu"); name != "a" || len(s0.Allocated("n1").Claims) != 1 || s0.Allocated("n1").Claims[0] != a {
		t.Fatal("Update changed the set it came from")
	}
	if s1.Parent() != s0 || s1.Gen() == s0.Gen() {
		t.Fatal("Update did not link the ancestry")
	}
	if slices.Sort(s1.touched); !slices.Equal(s1.Touched(), []string{"n1", "n2"}) {
		t.Fatalf("touched %v", s1.Touched())
	}
	fresh := NewClaimSet([]*resourceapi.ResourceClaim{b2}, nil)
	if !slices.Equal(fresh.Claims(), s1.Claims()) {
		t.Fatal("the updated claims differ from the same claims indexed afresh")
	}
	if w := s1.With(onNode("c", "n3")); w.Parent() != nil || w.Allocated("n3") == nil || len(w.Allocated("n3").Claims) != 1 {
		t.Fatal("With: a new line with the claim added")
	}
	cur := s1
	for range MaxAncestry + 4 {
		cur = cur.Update(map[string]*resourceapi.ResourceClaim{"default/x": nil})
	}
	n := 0
	for a := cur; a != nil; a = a.Parent() {
		n++
	}
	if n > MaxAncestry {
		t.Fatalf("the ancestry is %d sets long, want at most %d", n, MaxAncestry)
	}
}
