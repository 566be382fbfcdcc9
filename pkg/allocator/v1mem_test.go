package allocator

import (
	"maps"
	"reflect"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
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
	v1SharedMaps.mu.Lock()
	v1SharedMaps.attrs, v1SharedMaps.caps = nil, nil
	v1SharedMaps.mu.Unlock()
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

// TestV1MapInternerKeys: maps are shared only when every name, kind and
// value is equal, and the table starts over at v1SharedMapsMax entries.
func TestV1MapInternerKeys(t *testing.T) {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	ver := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &s} }
	num := func(i int64) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{IntValue: &i} }
	yes := func(b bool) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{BoolValue: &b} }
	type attrs = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	distinct := []attrs{
		{"a": str("1")},
		{"a": ver("1")},
		{"a": num(1)},
		{"a": yes(true)},
		{"a": yes(false)},
		{"b": str("1")},
		{"a": str("1;b"), "c": str("")},
		{"a": str("1"), "c": str("b")},
		{"a": str("")},
		{"a:": str("")},
		{"a": str(":")},
	}
	c := &v1MapInterner{}
	ptr := func(m attrs) uintptr { return reflect.ValueOf(m).Pointer() }
	for i, m := range distinct {
		if got := c.attributes(m); ptr(got) != ptr(m) {
			t.Errorf("map %d %v: got the map of an earlier, different one %v", i, invFormatAttrs(m), invFormatAttrs(got))
		}
	}
	for i, m := range distinct {
		again := maps.Clone(m)
		if got := c.attributes(again); ptr(got) != ptr(m) {
			t.Errorf("map %d %v: an equal map was not shared", i, invFormatAttrs(m))
		}
	}
	capsOf := func(q string) map[resourcev1.QualifiedName]resourcev1.DeviceCapacity {
		return map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(q)}}
	}
	one, two := c.capacities(capsOf("1Gi")), c.capacities(capsOf("2Gi"))
	if reflect.ValueOf(one).Pointer() == reflect.ValueOf(two).Pointer() {
		t.Errorf("capacities 1Gi and 2Gi share a map")
	}
	if got := c.capacities(capsOf("1Gi")); reflect.ValueOf(got).Pointer() != reflect.ValueOf(one).Pointer() {
		t.Errorf("equal capacities were not shared")
	}
	for i := range v1SharedMapsMax + 1 {
		c.attributes(attrs{"n": num(int64(i))})
	}
	if len(c.attrs) > v1SharedMapsMax {
		t.Errorf("the interner holds %d attribute maps, want at most %d", len(c.attrs), v1SharedMapsMax)
	}
}
