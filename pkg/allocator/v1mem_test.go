package allocator

import (
	"reflect"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSeedDevicesShareEqualCapacities: projected seed devices with equal
// capacities share one map (v1CapsInterner), devices whose capacities
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
