package allocator

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The inventory's cases are scenarios (testdata/scenarios/inventory.txt);
// what YAML cannot say (nil entries, pointer identity) and the benchmark
// stay here.

const invDriver = "gpu.example.com"

type invSliceOpt func(*resourcev1.ResourceSlice)

func invV1(name, pool string, gen, count int64, opts ...invSliceOpt) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: invDriver,
			Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count}},
	}
	for _, o := range opts {
		o(s)
	}
	if s.Spec.NodeName == nil && s.Spec.NodeSelector == nil && s.Spec.AllNodes == nil && s.Spec.PerDeviceNodeSelection == nil {
		s.Spec.NodeName = invPtr(pool)
	}
	return s
}

func invPtr[T any](v T) *T { return &v }

// TestInventoryInputsAsGiven: nil slices are skipped, and a slice's node
// selector is kept as published (the same object), for allocation
// results.
func TestInventoryInputsAsGiven(t *testing.T) {
	zone := &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
		MatchExpressions: []k8scorev1.NodeSelectorRequirement{{Key: "zone", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"a"}}},
	}}}
	sel := invV1("zone", "zone", 1, 1, func(s *resourcev1.ResourceSlice) {
		s.Spec.NodeSelector = zone
		s.Spec.Devices = []resourcev1.Device{{Name: "zoned"}}
	})
	pools, problems := V1Pools([]*resourcev1.ResourceSlice{nil, sel, nil})
	if len(pools) != 1 || len(problems) != 0 || pools[0].Devices[0].NodeSelector != zone {
		t.Errorf("V1Pools with nil slices: %+v, %v; want one pool keeping the published selector", pools, problems)
	}
	if pools, problems := SeedDevices([]*resourceapi.NodeResourceSlice{nil}); len(pools) != 0 || len(problems) != 0 {
		t.Errorf("SeedDevices of a nil slice: %+v, %v", pools, problems)
	}
	if m := NewModel("n", []*resourceapi.NodeResourceSlice{nil}); len(m.Problems()) != 0 || len(m.Drivers()) != 0 {
		t.Errorf("NewModel of a nil slice: problems %v, drivers %v", m.Problems(), m.Drivers())
	}
}

// BenchmarkV1Pools groups 1,000 node-local slices of 8 devices (four
// attributes, one capacity each) into pools, as the scheduler will when
// slices change.
func BenchmarkV1Pools(b *testing.B) {
	const nSlices, nDevices = 1000, 8
	var in []*resourcev1.ResourceSlice
	for i := range nSlices {
		node := fmt.Sprintf("node-%04d", i)
		s := invV1(node+"-gpu", node, 1, 1)
		for j := range nDevices {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d", j),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"model": {StringValue: invPtr("a100")}, "index": {IntValue: invPtr(int64(j))},
					"driverVersion": {VersionValue: invPtr("1.2.3")}, "mig": {BoolValue: invPtr(false)},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}},
			})
		}
		in = append(in, s)
	}
	b.ReportAllocs()
	for b.Loop() {
		pools, problems := V1Pools(in)
		if len(pools) != nSlices || len(problems) != 0 {
			b.Fatalf("%d pools, %d problems", len(pools), len(problems))
		}
	}
}

// invFormatAttrs prints attributes sorted by name, for failure messages.
func invFormatAttrs(m map[resourcev1.QualifiedName]resourcev1.DeviceAttribute) string {
	var parts []string
	for n, a := range m {
		v := "?"
		switch {
		case a.BoolValue != nil:
			v = fmt.Sprint(*a.BoolValue)
		case a.IntValue != nil:
			v = fmt.Sprint(*a.IntValue)
		case a.StringValue != nil:
			v = "s:" + *a.StringValue
		case a.VersionValue != nil:
			v = "v:" + *a.VersionValue
		}
		parts = append(parts, string(n)+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
