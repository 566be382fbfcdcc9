package dynamicresources

import (
	"slices"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// touchedIn finds the nodes a WithClaimUpdates link touched in each
// snapshot, also when nodes before them came or went since it last
// looked.
func TestTouchedIn(t *testing.T) {
	snap := func(names ...string) *framework.Snapshot {
		var ns []*corev1.Node
		for _, n := range names {
			ns = append(ns, schedtest.MakeNode(n).Obj())
		}
		return framework.NewSnapshot(ns, nil)
	}
	allocated := func(node string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{}
		c.Namespace, c.Name, c.ResourceVersion = "default", "c-"+node, "2"
		c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{{
			DriverName: "d", StructuredData: &resourceapi.StructuredResourceHandle{NodeName: node}}}}
		return c
	}
	o := NewObjects(Lists{}).WithClaimUpdates("2", map[string]*resourceapi.ResourceClaim{
		"default/c-n2": allocated("n2"), "default/c-n4": allocated("n4"), "default/c-gone": allocated("gone")})
	for _, tc := range []struct {
		nodes []string
		want  map[string]int
	}{
		{[]string{"n1", "n2", "n3", "n4"}, map[string]int{"n2": 1, "n4": 3, "gone": -1}},
		{[]string{"n1", "n2", "n3", "n4"}, map[string]int{"n2": 1, "n4": 3, "gone": -1}}, // as remembered
		{[]string{"n0", "n1", "n2", "n3", "n4"}, map[string]int{"n2": 2, "n4": 4, "gone": -1}},
		{[]string{"gone", "n2", "n4"}, map[string]int{"n2": 1, "n4": 2, "gone": 0}},
		{[]string{"n2", "n4"}, map[string]int{"n2": 0, "n4": 1, "gone": -1}},
		{[]string{"n2", "n4", "zz"}, map[string]int{"n2": 0, "n4": 1, "gone": -1}},
	} {
		got := o.touchedIn(snap(tc.nodes...))
		for j, name := range o.touched {
			if got[j] != tc.want[name] {
				t.Errorf("nodes %v: %s at %d, want %d", tc.nodes, name, got[j], tc.want[name])
			}
		}
		if !slices.Equal(got, *o.touchedAt.Load()) {
			t.Errorf("nodes %v: positions not remembered", tc.nodes)
		}
	}
}
