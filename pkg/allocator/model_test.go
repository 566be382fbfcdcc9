package allocator

import (
	"slices"
	"strings"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func attrs(kv ...string) []resourceapi.Attribute {
	var out []resourceapi.Attribute
	for i := 0; i < len(kv); i += 2 {
		out = append(out, stringAttr(kv[i], kv[i+1]))
	}
	return out
}

// precedenceSlice has one attribute "a" set at every level, and one
// attribute per level that is not overridden.
func precedenceSlice() *resourceapi.PartitionableResources {
	return &resourceapi.PartitionableResources{
		CommonAttributes: []resourceapi.AttributeGroup{
			{Name: "card", Attributes: attrs("a", "card-ref", "card", "x")},
			{Name: "group", Attributes: attrs("a", "group-ref", "group", "x")},
			{Name: "first", Attributes: attrs("a", "first-ref", "first", "x")},
			{Name: "second", Attributes: attrs("a", "second-ref", "second", "x")},
		},
		ResourceInstances: []resourceapi.ResourceInstance{{
			Name: "card", CommonAttributesRefs: []string{"card"}, Attributes: attrs("a", "card-own", "own", "x"),
			Partitions: []resourceapi.ResourceInstanceGroup{{
				Name: "g", CommonAttributesRefs: []string{"group"},
				ResourceInstances: []resourceapi.ResourceInstance{
					{Name: "own", CommonAttributesRefs: []string{"first", "second"}, Attributes: attrs("a", "leaf-own")},
					{Name: "refs", CommonAttributesRefs: []string{"first", "second"}},
					{Name: "group-only"},
				},
			}},
		}},
	}
}

func TestEffectiveAttributes(t *testing.T) {
	m := NewModel("n", []*resourceapi.NodeResourceSlice{makeSlice("n", "d", precedenceSlice())})
	if len(m.Problems()) > 0 {
		t.Fatal(m.Problems())
	}
	tests := map[string]struct {
		id   string
		expr string
	}{
		"own attributes win":          {"card/g/own", `strings["a"] == "leaf-own"`},
		"later reference wins":        {"card/g/refs", `strings["a"] == "second-ref"`},
		"group reference over parent": {"card/g/group-only", `strings["a"] == "group-ref"`},
		"inherited from every level":  {"card/g/own", `["card", "group", "first", "second", "own"].all(k, k in strings)`},
	}
	dm := m.drivers["d"]
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			x, ok := dm.byID[tc.id]
			if !ok {
				t.Fatalf("no instance %s", tc.id)
			}
			sel, err := compileSelector(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if o := sel.eval(dm.insts[x].vars); o != outcomeTrue {
				t.Errorf("%s on %s: %v", tc.expr, tc.id, o)
			}
		})
	}
}

func TestInstanceIDs(t *testing.T) {
	m := gpuNode("n", 1)
	ids, usable := m.Instances("gpu")
	want := []string{"gpu-0/full/full-0", "gpu-0/half/half-0", "gpu-0/half/half-1",
		"gpu-0/quarter/quarter-0", "gpu-0/quarter/quarter-1", "gpu-0/quarter/quarter-2", "gpu-0/quarter/quarter-3"}
	if !slices.Equal(ids, want) {
		t.Errorf("instances %v, want %v", ids, want)
	}
	if slices.Contains(usable, false) {
		t.Errorf("usable %v", usable)
	}
	if d := m.Drivers(); !slices.Equal(d, []string{"gpu"}) {
		t.Errorf("drivers %v", d)
	}
}

func TestModelProblems(t *testing.T) {
	bad := &resourceapi.PartitionableResources{
		CommonAttributes: []resourceapi.AttributeGroup{{Name: "g"}, {Name: "g"}},
		ResourceInstances: []resourceapi.ResourceInstance{
			{Name: "ok"},
			{Name: "ok"},
			{Name: "a/b"},
			{Name: ""},
			{Name: "unknown-ref", CommonAttributesRefs: []string{"nope"}},
			{Name: "bad-attr", Attributes: []resourceapi.Attribute{{Name: "v", AttributeValue: resourceapi.AttributeValue{Version: ptr("x.y")}}}},
			{Name: "sick", Health: resourceapi.InstanceUnhealthy, Partitions: []resourceapi.ResourceInstanceGroup{
				{Name: "g", ResourceInstances: []resourceapi.ResourceInstance{{Name: "child"}}},
				{Name: "g"},
			}},
		},
	}
	other := makeSlice("other-node", "d", &resourceapi.PartitionableResources{})
	other.Name = "z-other"
	none := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "z-none"},
		Spec: resourceapi.NodeResourceSliceSpec{NodeName: "n", DriverName: "d"}}
	m := NewModel("n", []*resourceapi.NodeResourceSlice{makeSlice("n", "d", bad), other, none, nil})
	var msgs []string
	for _, p := range m.Problems() {
		msgs = append(msgs, p.String())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{
		`attribute group "g" is defined twice`,
		"ok: duplicate instance ID",
		`a/b: instance name "a/b" contains "/"`,
		"instance has an empty name",
		`unknown-ref: unknown attribute group "nope"`,
		`bad-attr: attribute "v": parse version "x.y"`,
		"sick/g: duplicate partition group",
		`z-other (driver d): belongs to node "other-node"`,
		"z-none (driver d): has no model",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	ids, usable := m.Instances("d")
	wantUsable := map[string]bool{"ok": true, "unknown-ref": false, "bad-attr": false, "sick/g/child": false}
	for i, id := range ids {
		if w, ok := wantUsable[id]; !ok || w != usable[i] {
			t.Errorf("instance %s usable=%v", id, usable[i])
		}
	}
}

func TestResolveIDs(t *testing.T) {
	m := gpuNode("n", 1)
	dm := m.drivers["gpu"]
	tests := map[string]struct {
		id     string
		groups []string
		inst   string
	}{
		"leaf":          {"gpu-0/half/half-1", []string{"gpu-0/half"}, "gpu-0/half/half-1"},
		"whole card":    {"gpu-0", nil, "gpu-0"},
		"gone group":    {"gpu-0/eighths/eighth-0", nil, "gpu-0"},
		"gone instance": {"gpu-0/half/half-7", []string{"gpu-0/half"}, ""},
		"group only":    {"gpu-0/quarter", []string{"gpu-0/quarter"}, ""},
		"unknown root":  {"gpu-9/half/half-0", nil, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			groups, inst := dm.resolve(tc.id)
			var gids []string
			for _, g := range groups {
				gids = append(gids, dm.groups[g].id)
			}
			gotInst := ""
			if inst >= 0 {
				gotInst = dm.insts[inst].id
			}
			if !slices.Equal(gids, tc.groups) || gotInst != tc.inst {
				t.Errorf("resolve(%s) = %v, %q; want %v, %q", tc.id, gids, gotInst, tc.groups, tc.inst)
			}
		})
	}
}

func TestStateLocksAndCapacity(t *testing.T) {
	m := gpuNode("n", 2)
	dm := m.drivers["gpu"]
	empty := NewNodeState(m, nil, nil)
	if c := empty.Capacity(); c != 8 {
		t.Fatalf("empty capacity %d, want 8", c)
	}
	a := allocatedClaim("a", "n", "gpu", "gpu-0/quarter/quarter-1")
	b := allocatedClaim("b", "n", "gpu", "gpu-0/quarter/quarter-2")
	st := empty.WithAllocated(a, b)
	tests := map[string]bool{
		"gpu-0/quarter/quarter-0": true, "gpu-0/quarter/quarter-1": false,
		"gpu-0/half/half-0": false, "gpu-0/full/full-0": false, "gpu-1/full/full-0": true,
	}
	for id, want := range tests {
		if got := dm.free(st.stateOf("gpu"), dm.byID[id]); got != want {
			t.Errorf("free(%s) = %v, want %v", id, got, want)
		}
	}
	if c := st.Capacity(); c != 6 {
		t.Errorf("capacity %d, want 6", c)
	}
	// Releasing one claim keeps the lock; releasing both frees the card.
	if dm.free(st.WithoutAllocated(a).stateOf("gpu"), dm.byID["gpu-0/half/half-0"]) {
		t.Error("lock released while a claim still uses the quarters")
	}
	if !dm.free(st.WithoutAllocated(a, b).stateOf("gpu"), dm.byID["gpu-0/half/half-0"]) {
		t.Error("lock kept after every claim was released")
	}
	if empty.Capacity() != 8 {
		t.Error("WithAllocated changed the original state")
	}
	// Claims for other nodes or drivers are ignored.
	if c := empty.WithAllocated(allocatedClaim("x", "other", "gpu", "gpu-0"), allocatedClaim("y", "n", "nope", "gpu-0")).Capacity(); c != 8 {
		t.Errorf("foreign claims changed capacity to %d", c)
	}
}

// TestSeveralSlicesOfOneDriver: a driver may publish a node's instances in
// several slices; they form one forest, and a root name published twice is
// used once.
func TestSeveralSlicesOfOneDriver(t *testing.T) {
	s1 := makeSlice("n", "d", &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{{Name: "a"}, {Name: "b"}}})
	s2 := makeSlice("n", "d", &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{{Name: "b"}, {Name: "c"}}})
	s1.Name, s2.Name = "s1", "s2"
	m := NewModel("n", []*resourceapi.NodeResourceSlice{s2, s1})
	ids, _ := m.Instances("d")
	if !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Errorf("instances %v", ids)
	}
	if len(m.Problems()) != 1 || m.Problems()[0].Slice != "s2" {
		t.Errorf("problems %v", m.Problems())
	}
}
