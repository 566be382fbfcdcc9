package client_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/pkg/client"
)

// TestResourceSliceInformerSharesDeviceMaps: the ResourceSlices of two
// nodes of one shape, as the factory's informer caches them, share their
// devices' attribute and capacity maps device by device (InternDeviceMaps),
// with every device reading its own values; the informers of two
// factories (two components of a process) share them too.
func TestResourceSliceInformerSharesDeviceMaps(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	driver := uniqueName("intern") + ".example.com"
	var names []string
	for _, node := range []string{"node-a", "node-b"} {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: driver + "-" + node}}
		s.Spec.Driver, s.Spec.NodeName = driver, &node
		s.Spec.Pool = resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}
		for i := range 3 {
			model, numa := "A100", int64(i)
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d", i),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"model": {StringValue: &model}, "numa": {IntValue: &numa}},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("1Gi")}},
			})
		}
		if _, err := c.ResourceSlices().Create(ctx, s); err != nil {
			t.Fatalf("create slice: %v", err)
		}
		names = append(names, s.Name)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = c.ResourceSlices().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	var cached [][]*resourcev1.ResourceSlice
	for range 2 {
		f := client.NewFactory(c, 0)
		inf := f.ResourceSlices()
		runCtx, stop := context.WithCancel(ctx)
		defer func() { stop(); f.Shutdown() }()
		f.Start(runCtx)
		if err := f.WaitForCacheSync(ctx); err != nil {
			t.Fatalf("sync: %v", err)
		}
		var got []*resourcev1.ResourceSlice
		for _, n := range names {
			s, err := inf.Lister().Get("", n)
			if err != nil {
				t.Fatalf("lister get %s: %v", n, err)
			}
			got = append(got, s)
		}
		cached = append(cached, got)
	}
	ptr := func(m any) uintptr { return reflect.ValueOf(m).Pointer() }
	first := cached[0][0].Spec.Devices
	for fi, slices := range cached {
		for si, s := range slices {
			for i, d := range s.Spec.Devices {
				if ptr(d.Attributes) != ptr(first[i].Attributes) || ptr(d.Capacity) != ptr(first[i].Capacity) {
					t.Errorf("factory %d, slice %d, device %s: maps not shared with the first slice's %s", fi, si, d.Name, first[i].Name)
				}
				if n := d.Attributes["numa"].IntValue; n == nil || *n != int64(i) {
					t.Errorf("factory %d, slice %d, device %s: numa %v, want %d", fi, si, d.Name, n, i)
				}
			}
		}
	}
	if ptr(first[0].Attributes) == ptr(first[1].Attributes) {
		t.Errorf("devices with different numa share an attribute map")
	}
}
