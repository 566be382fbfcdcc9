package allocator

import (
	"slices"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
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

// TestClaimSetV1Claims: the set holds the resource.k8s.io/v1 claims beside
// the v1alpha2 ones: by key, sorted, and by the pod entry they were
// generated for; UpdateTouching applies v1 events as indexing the final
// claims afresh would, Update and With keep them, and earlier sets stay
// as they were.
func TestClaimSetV1Claims(t *testing.T) {
	v1c := func(name string, podUID types.UID) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "2"}}
		if podUID != "" {
			c.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: "gpu"}
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: podUID, Controller: new(true)}}
		}
		return c
	}
	a, g := v1c("a", ""), v1c("g-1", "uid-p")
	s0 := NewClaimSet([]*resourceapi.ResourceClaim{onNode("seed", "n1")}, nil, a, g)
	if c, ok := s0.V1Claim("default/a"); !ok || c != a {
		t.Fatal("V1Claim does not find a")
	}
	if name, ok := s0.GeneratedV1("uid-p", "gpu"); !ok || name != "g-1" {
		t.Fatalf("GeneratedV1 = %q, %v; want g-1", name, ok)
	}
	if _, ok := s0.Generated("uid-p", "gpu"); ok {
		t.Fatal("a v1 claim shows in the v1alpha2 generated index")
	}
	// The pod's claim is replaced by g-2 (g-1 deleted), a is deleted, b
	// is created; the v1alpha2 claim is untouched.
	b, g2 := v1c("b", ""), v1c("g-2", "uid-p")
	s1 := s0.UpdateTouching(nil, map[string]*resourcev1.ResourceClaim{"default/a": nil, "default/g-1": nil, "default/g-2": g2, "default/b": b}, Touch{})
	fresh := NewClaimSet([]*resourceapi.ResourceClaim{onNode("seed", "n1")}, nil, b, g2)
	names := func(s *ClaimSet) []string {
		var out []string
		for _, c := range s.V1Claims() {
			out = append(out, c.Name)
		}
		return out
	}
	if got, want := names(s1), names(fresh); !slices.Equal(got, want) || s1.V1Len() != 2 {
		t.Fatalf("v1 claims after the events %q (%d), indexed afresh %q", got, s1.V1Len(), want)
	}
	if name, ok := s1.GeneratedV1("uid-p", "gpu"); !ok || name != "g-2" {
		t.Fatalf("after the events GeneratedV1 = %q, %v; want g-2", name, ok)
	}
	if _, ok := s1.Claim("default", "seed"); !ok || s1.Parent() != s0 {
		t.Fatal("a v1 event lost the v1alpha2 claim or the ancestry link")
	}
	if got := names(s0); !slices.Equal(got, []string{"a", "g-1"}) {
		t.Fatalf("the earlier set changed: %q", got)
	}
	gone := v1c("g-2", "uid-p")
	gone.DeletionTimestamp = &metav1.Time{}
	s2 := s1.UpdateTouching(nil, map[string]*resourcev1.ResourceClaim{"default/g-2": gone}, Touch{})
	if _, ok := s2.GeneratedV1("uid-p", "gpu"); ok {
		t.Fatal("a claim being deleted still answers for its pod's entry")
	}
	for name, s := range map[string]*ClaimSet{"Update": s1.Update(map[string]*resourceapi.ResourceClaim{"default/x": onNode("x", "n2")}), "With": s1.With(onNode("y", "n2"))} {
		if got := names(s); !slices.Equal(got, names(s1)) {
			t.Errorf("%s lost the v1 claims: %q", name, got)
		}
	}
}

// TestTouchedAll: a link made with Touch.All says so, and its children
// do not inherit it.
func TestTouchedAll(t *testing.T) {
	s0 := NewClaimSet(nil, nil)
	s1 := s0.UpdateTouching(nil, nil, Touch{All: true})
	s2 := s1.UpdateTouching(nil, nil, Touch{Nodes: []string{"n1"}})
	if s0.TouchedAll() || !s1.TouchedAll() || s2.TouchedAll() {
		t.Fatalf("TouchedAll: %v %v %v, want false true false", s0.TouchedAll(), s1.TouchedAll(), s2.TouchedAll())
	}
	if !slices.Equal(s2.Touched(), []string{"n1"}) {
		t.Fatalf("touched %v, want [n1]", s2.Touched())
	}
}
