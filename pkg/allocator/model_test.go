package allocator

import (
	"slices"
	"testing"
)

// The model's cases are scenarios (testdata/scenarios/seed-model.txt);
// resolving stored IDs is internal and stays here.

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
