package allocator

import (
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
)

// Devices with binding conditions are allocated (DRADeviceBindingConditions,
// on in Kubernetes 1.37); their results carry the conditions, and a device
// that binds to the node limits the allocation to that node even when its
// slice is available on all nodes.
func TestV1BindingConditions(t *testing.T) {
	attach := func(d *resourcev1.Device) {
		d.BindingConditions = []string{"Attached"}
		d.BindingFailureConditions = []string{"AttachFailed"}
	}
	bindsToNode := func(d *resourcev1.Device) { t := true; d.BindsToNode = &t }
	dev := func(name string, opts ...func(*resourcev1.Device)) resourcev1.Device {
		d := v1tDev(name)
		for _, o := range opts {
			o(&d)
		}
		return d
	}
	for name, tc := range map[string]struct {
		slice        *resourcev1.ResourceSlice
		wantSelector string // "" no node selector
	}{
		"node-local":              {slice: v1tSlice("s", "gpu.example.com", "node-a", "node-a", dev("gpu-0", attach))},
		"all nodes":               {slice: v1tSlice("s", "gpu.example.com", "fabric", "", dev("gpu-0", attach))},
		"all nodes, bindsToNode":  {slice: v1tSlice("s", "gpu.example.com", "fabric", "", dev("gpu-0", attach, bindsToNode)), wantSelector: "node-a"},
		"bindsToNode, no binding": {slice: v1tSlice("s", "gpu.example.com", "fabric", "", dev("gpu-0", bindsToNode)), wantSelector: "node-a"},
	} {
		t.Run(name, func(t *testing.T) {
			st := NewState(NewInventory([]*resourcev1.ResourceSlice{tc.slice}, nil), nil, nil)
			node := v1tNode("node-a")
			if tc.slice.Spec.NodeName != nil {
				tc.wantSelector = "node-a" // a node-local device's allocation names its node
			}
			res := v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("c", v1tExact("r", "gpu", 1)))...)
			if !res.Fits {
				t.Fatalf("does not fit: %v", res.Reasons)
			}
			a := res.Allocations[0]
			r := a.Devices.Results[0]
			wantConds := tc.slice.Spec.Devices[0].BindingConditions
			if !slices.Equal(r.BindingConditions, wantConds) || !slices.Equal(r.BindingFailureConditions, tc.slice.Spec.Devices[0].BindingFailureConditions) {
				t.Errorf("result conditions %v / %v, want those of the device", r.BindingConditions, r.BindingFailureConditions)
			}
			got := ""
			if a.NodeSelector != nil {
				got = a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]
			}
			if got != tc.wantSelector {
				t.Errorf("node selector names %q, want %q", got, tc.wantSelector)
			}
		})
	}
}
