package allocator

import (
	"reflect"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/devicemaps"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSeedDevicesShareEqualCapacities: projected seed devices with equal
// capacities share one map (v1SharedMaps), devices whose capacities
// differ keep their own, and every device still has its own values.
func TestSeedDevicesShareEqualCapacities(t *testing.T) {
	s := v1tBenchSeedSlice("node-a")
	// instance-9 gets more memory than the common attribute group's.
	big := resource.MustParse("2Gi")
	last := &s.Spec.Partitionable.ResourceInstances[9]
	last.Attributes = append(last.Attributes, resourceapi.Attribute{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: &big}})
	pools, problems := SeedDevices([]*resourceapi.NodeResourceSlice{s})
	if len(problems) > 0 || len(pools) != 1 || len(pools[0].Devices) != 10 {
		t.Fatalf("pools %+v, problems %v; want one pool of 10 devices", pools, problems)
	}
	devs := pools[0].Devices
	mapOf := func(i int) uintptr { return reflect.ValueOf(devs[i].Capacity).Pointer() }
	for i := 1; i < 9; i++ {
		if mapOf(i) != mapOf(0) {
			t.Errorf("device %s has its own capacity map, want the one of %s", devs[i].Name, devs[0].Name)
		}
	}
	if mapOf(9) == mapOf(0) {
		t.Errorf("device %s shares the capacity map of %s though its memory differs", devs[9].Name, devs[0].Name)
	}
	for i, want := range map[int]string{0: "1Gi", 8: "1Gi", 9: "2Gi"} {
		if got := devs[i].Capacity["memory"].Value; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("device %s: memory %s, want %s", devs[i].Name, got.String(), want)
		}
	}
	if a, b := devs[0].Attributes["numa"].IntValue, devs[1].Attributes["numa"].IntValue; a == nil || b == nil || *a == *b {
		t.Errorf("numa of %s and %s: %v, %v; want their own values", devs[0].Name, devs[1].Name, a, b)
	}
}

// TestSeedDevicesShareEqualAttributes: projected seed devices whose
// attributes are equal share one attribute map, on one node and across
// nodes (v1SharedMaps); devices whose attributes differ keep their own;
// each device still reads its own values.
func TestSeedDevicesShareEqualAttributes(t *testing.T) {
	// Start from an empty table, so that it cannot start over between
	// the projections compared (other tests fill it).
	defer func(old *devicemaps.Interner) { v1SharedMaps = old }(v1SharedMaps)
	v1SharedMaps = &devicemaps.Interner{}
	a, b := v1tBenchSeedSlice("node-a"), v1tBenchSeedSlice("node-b")
	pools, problems := SeedDevices([]*resourceapi.NodeResourceSlice{a, b})
	if len(problems) > 0 || len(pools) != 2 || len(pools[0].Devices) != 10 || len(pools[1].Devices) != 10 {
		t.Fatalf("pools %+v, problems %v; want two pools of 10 devices", pools, problems)
	}
	mapOf := func(p, i int) uintptr { return reflect.ValueOf(pools[p].Devices[i].Attributes).Pointer() }
	for i := range 10 {
		if mapOf(0, i) != mapOf(1, i) {
			t.Errorf("device %s: node-b's has its own attribute map, want node-a's", pools[0].Devices[i].Name)
		}
		if i > 0 && mapOf(0, i) == mapOf(0, 0) {
			t.Errorf("device %s shares the attribute map of %s though its numa differs", pools[0].Devices[i].Name, pools[0].Devices[0].Name)
		}
	}
	// The Models of the scheduler's inventory (NewInventoryModels) share
	// them too.
	inv := NewInventoryModels(nil, []*resourceapi.NodeResourceSlice{b}, nil)
	for _, p := range inv.Pools() {
		for i, d := range p.Devices {
			if reflect.ValueOf(d.Attributes).Pointer() != mapOf(0, i) {
				t.Errorf("inventory device %s has its own attribute map", d.Name)
			}
		}
	}
	for p := range pools {
		for i, d := range pools[p].Devices {
			if n := d.Attributes["numa"].IntValue; n == nil || *n != int64(i) {
				t.Errorf("device %s of %s: numa %v, want %d", d.Name, pools[p].Name, n, i)
			}
			if m := d.Attributes["model"].StringValue; m == nil || *m != "A100" {
				t.Errorf("device %s of %s: model %v, want A100", d.Name, pools[p].Name, m)
			}
			if v := d.Attributes["driverVersion"].VersionValue; v == nil || *v != "1.2.3" {
				t.Errorf("device %s of %s: driverVersion %v, want 1.2.3", d.Name, pools[p].Name, v)
			}
		}
	}
}
