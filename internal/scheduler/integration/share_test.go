package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// Two schedulers take shares of one shareable NIC at once (consumable
// capacity: allowMultipleAllocations, 100G of bandwidth), each from its
// own view, as TestTwoSchedulersNeverShareADevice does with whole GPUs.
// Four pods ask 40G each: two shares fit, the other pods must wait,
// whichever scheduler judged them, and the shares bound never sum to more
// than the NIC's capacity. The API server's allocation fence on (node,
// driver) turns the loser of a race into a 409; its scheduler judges the
// pod again against the one device-use state, which sums the shares.
func TestTwoSchedulersShareANICWithinItsCapacity(t *testing.T) {
	var second scheduler.Config
	e := draSetupWith(t, func(c *scheduler.Config) { second = *c })
	second.SchedulerName = e.name + "-b"
	ctx := callCtx(t)
	const driver = "nic.example.com"
	node := e.node("gpus")
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-nic"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "nic-0", AllowMultipleAllocations: ptrTo(true),
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: resource.MustParse("100G")}}}}}}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-nic"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `"`}}}}}
	must(t, "create slice", func() error { _, err := e.c.ResourceSlices().Create(ctx, slice); return err })
	must(t, "create device class", func() error { _, err := e.c.DeviceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.ResourceSlices().Delete(c, slice.Name, metav1.DeleteOptions{})
		_ = e.c.DeviceClasses().Delete(c, class.Name, metav1.DeleteOptions{})
	})

	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.Run(runCtx, second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second scheduler: %v", err)
		}
	})

	// Both schedulers are running before the pods come, so that their
	// cycles overlap.
	e.createPod(schedtest.MakePod("probe").Req("cpu", "100m").SchedulerName(second.SchedulerName))
	e.waitBound("probe")
	const pods = 4
	for i := range pods {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: e.ns},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "nic",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name, Capacity: &resourcev1.CapacityRequirements{
					Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("40G")}}}}}}}}
		must(t, "create claim "+c.Name, func() error { _, err := e.c.ResourceClaimsV1(e.ns).Create(ctx, c); return err })
	}
	for i := range pods {
		b := claimPod(fmt.Sprintf("p%d", i), fmt.Sprintf("s%d", i))
		if i%2 == 1 {
			b = b.SchedulerName(second.SchedulerName)
		}
		e.createPod(b)
	}
	e.eventually("two pods bound and two unschedulable", func() bool {
		bound, pending := 0, 0
		for i := range pods {
			p := e.getPod(fmt.Sprintf("p%d", i))
			if p.Spec.NodeName != "" {
				bound++
			} else if c := scheduler.PodScheduledCondition(p); c != nil && c.Status == corev1.ConditionFalse {
				pending++
			}
		}
		return bound == 2 && pending == pods-2
	})
	claims, err := e.c.ResourceClaimsV1(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sum resource.Quantity
	shares := map[string]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.ShareID == nil {
				t.Errorf("claim %s: result on %s without a shareID", c.Name, r.Device)
				continue
			}
			if other, dup := shares[string(*r.ShareID)]; dup {
				t.Errorf("share %s in claims %s and %s", *r.ShareID, other, c.Name)
			}
			shares[string(*r.ShareID)] = c.Name
			sum.Add(r.ConsumedCapacity["bandwidth"])
		}
	}
	if len(shares) != 2 || sum.Cmp(resource.MustParse("80G")) != 0 {
		t.Errorf("shares %v consume %s of 100G, want two of 40G", shares, sum.String())
	}
}
