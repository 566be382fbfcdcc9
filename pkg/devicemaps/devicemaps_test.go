package devicemaps

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

type attrs = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
type caps = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity

func str(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
func ver(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &s} }
func num(i int64) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{IntValue: &i} }
func yes(b bool) resourcev1.DeviceAttribute   { return resourcev1.DeviceAttribute{BoolValue: &b} }

func ptr[M any](m M) uintptr { return reflect.ValueOf(m).Pointer() }

// TestKeys: maps are shared only when every name, kind and value is
// equal, maps the interner cannot compare are returned as they are, and
// the table starts over at Max entries.
func TestKeys(t *testing.T) {
	two := resourcev1.DeviceAttribute{IntValue: num(1).IntValue, StringValue: str("1").StringValue}
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
		{"a": two}, // invalid (two values), but not {"a": num(1)}
	}
	c := &Interner{}
	for i, m := range distinct {
		if got := c.Attributes(m); ptr(got) != ptr(m) {
			t.Errorf("map %d %v: got the map of an earlier, different one %v", i, m, got)
		}
	}
	for i, m := range distinct {
		if got := c.Attributes(maps.Clone(m)); ptr(got) != ptr(m) {
			t.Errorf("map %d %v: an equal map was not shared", i, m)
		}
	}
	noValue := attrs{"a": {}}
	if got := c.Attributes(maps.Clone(noValue)); ptr(got) == ptr(c.Attributes(noValue)) {
		t.Errorf("attributes without a value were shared")
	}

	one, two2 := c.Capacities(capsOf("1Gi")), c.Capacities(capsOf("2Gi"))
	if ptr(one) == ptr(two2) {
		t.Errorf("capacities 1Gi and 2Gi share a map")
	}
	if got := c.Capacities(capsOf("1Gi")); ptr(got) != ptr(one) {
		t.Errorf("equal capacities were not shared")
	}
	if got := c.Capacities(capsOf("1024Mi")); ptr(got) != ptr(one) {
		t.Errorf("1024Mi, canonically 1Gi, was not shared with 1Gi")
	}
	if got := c.Capacities(capsOf("1073741824")); ptr(got) == ptr(one) {
		t.Errorf("1073741824 (decimal) shares 1Gi's map: their canonical forms differ")
	}
	policy := func() caps {
		return caps{"memory": {Value: resource.MustParse("1Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{}}}
	}
	if a, b := c.Capacities(policy()), c.Capacities(policy()); ptr(a) == ptr(b) {
		t.Errorf("capacities with a requestPolicy were shared")
	}

	for i := range Max + 1 {
		c.Attributes(attrs{"n": num(int64(i))})
	}
	if len(c.attrs) > Max {
		t.Errorf("the interner holds %d attribute maps, want at most %d", len(c.attrs), Max)
	}
}

// TestSlice: the devices of two nodes' slices of one shape share their
// maps, device by device; devices that differ keep their own, and every
// device reads its own values.
func TestSlice(t *testing.T) {
	slice := func(node string) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{}
		for i := range 4 {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
				Name:       fmt.Sprintf("gpu-%d", i),
				Attributes: attrs{"model": str("A100"), "numa": num(int64(i))},
				Capacity:   capsOf("1Gi"),
			})
		}
		return s
	}
	c := &Interner{}
	a, b := slice("a"), slice("b")
	c.Slice(a)
	c.Slice(b)
	for i := range a.Spec.Devices {
		da, db := &a.Spec.Devices[i], &b.Spec.Devices[i]
		if ptr(da.Attributes) != ptr(db.Attributes) || ptr(da.Capacity) != ptr(db.Capacity) {
			t.Errorf("device %d: the nodes' devices do not share their maps", i)
		}
		if i > 0 && ptr(da.Attributes) == ptr(a.Spec.Devices[0].Attributes) {
			t.Errorf("device %d shares device 0's attributes though its numa differs", i)
		}
		if n := db.Attributes["numa"].IntValue; n == nil || *n != int64(i) {
			t.Errorf("device %d: numa %v, want %d", i, n, i)
		}
		if ptr(da.Capacity) != ptr(a.Spec.Devices[0].Capacity) {
			t.Errorf("device %d does not share device 0's equal capacities", i)
		}
	}
}

func capsOf(q string) caps { return caps{"memory": {Value: resource.MustParse(q)}} }
