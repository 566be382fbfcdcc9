package integration

import (
	"context"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// bindingEnv is a node with one v1 GPU whose driver must attach it before
// the pod may run: binding condition Attached, failure condition
// AttachFailed. Its device class selects it; claims name the class.
func bindingEnv(t *testing.T, mutate func(*scheduler.Config)) *env {
	t.Helper()
	e := bindingCluster(t, mutate)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: e.ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: e.name}}}}}}
	must(t, "create claim", func() error { _, err := e.c.ResourceClaimsV1(e.ns).Create(callCtx(t), claim); return err })
	e.createPod(claimPod("p", "c"))
	return e
}

// bindingCluster is bindingEnv without the claim and the pod.
func bindingCluster(t *testing.T, mutate func(*scheduler.Config)) *env {
	t.Helper()
	e := newEnv(t, mutate, schedtest.MakeNode("gpus").Alloc("cpu", "8").Alloc("pods", "20").Obj())
	ctx := callCtx(t)
	node := e.node("gpus")
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0",
				BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"}}}}}
	must(t, "create slice", func() error { _, err := e.c.ResourceSlices().Create(ctx, slice); return err })
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + draDriver + `"`}}}}}
	must(t, "create device class", func() error { _, err := e.c.DeviceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.ResourceSlices().Delete(c, slice.Name, metav1.DeleteOptions{})
		_ = e.c.DeviceClasses().Delete(c, class.Name, metav1.DeleteOptions{})
	})
	return e
}

// waitAllocatedUnbound waits until claim c is allocated and reserved for
// pod p while p has no node (the first step), and returns the claim.
func (e *env) waitAllocatedUnbound() *resourcev1.ResourceClaim {
	e.t.Helper()
	var c *resourcev1.ResourceClaim
	e.eventually("claim c allocated for the waiting pod", func() bool {
		var err error
		if c, err = e.c.ResourceClaimsV1(e.ns).Get(callCtx(e.t), "c"); err != nil {
			e.t.Fatalf("get claim: %v", err)
		}
		return c.Status.Allocation != nil && len(c.Status.ReservedFor) == 1 && c.Status.ReservedFor[0].Name == "p"
	})
	r := c.Status.Allocation.Devices.Results[0]
	if len(r.BindingConditions) != 1 || r.BindingConditions[0] != "Attached" || r.BindingFailureConditions[0] != "AttachFailed" {
		e.t.Fatalf("result %+v does not carry the device's binding conditions", r)
	}
	if c.Status.Allocation.AllocationTimestamp == nil {
		e.t.Errorf("allocation without allocationTimestamp")
	}
	if node := e.getPod("p").Spec.NodeName; node != "" {
		e.t.Fatalf("pod bound to %s before its binding condition is True", node)
	}
	return c
}

// setDeviceCondition sets a condition True on claim c's device, as the
// driver's controller does.
func (e *env) setDeviceCondition(cond string) {
	e.t.Helper()
	must(e.t, "set "+cond, func() error {
		for {
			c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(e.t), "c")
			if err != nil {
				return err
			}
			r := c.Status.Allocation.Devices.Results[0]
			st := resourcev1.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: cond, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()})
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{st}
			_, err = e.c.ResourceClaimsV1(e.ns).UpdateStatus(callCtx(e.t), c)
			if !apierrors.IsConflict(err) {
				return err
			}
		}
	})
}

// The pod waits, its claim allocated and reserved, until the driver sets
// the binding condition, and then runs on the node. The wait is told by
// an event naming the device and the condition.
func TestBindingConditionsSatisfied(t *testing.T) {
	e := bindingEnv(t, nil)
	e.waitAllocatedUnbound()
	e.eventually("the waiting event", func() bool {
		return e.hasEvent("p", scheduler.ReasonWaitingForBindingConditions, "waiting for binding conditions: claim c device "+draDriver+"/"+e.node("gpus")+"/gpu-0: Attached")
	})
	// explain's device report shows the wait.
	devs, err := scheduler.PodDevices(callCtx(t), e.c, e.getPod("p"), 5*time.Second)
	if err != nil || len(devs) != 1 || devs[0].State != scheduler.DeviceBinding || devs[0].Why != "waiting for binding condition Attached" {
		t.Fatalf("device report %+v (%v), want one device binding, waiting for Attached", devs, err)
	}
	e.setDeviceCondition("Attached")
	if node := e.waitBound("p"); node != "gpus" {
		t.Fatalf("bound to %s", node)
	}
}

// A True failure condition releases the allocation (and the devices'
// status with it) and the pod is retried: allocated again, it waits
// again, and binds once the condition is set.
func TestBindingConditionsFailure(t *testing.T) {
	e := bindingEnv(t, nil)
	first := e.waitAllocatedUnbound()
	e.setDeviceCondition("AttachFailed")
	e.eventually("the failure event", func() bool {
		return e.hasEvent("p", scheduler.ReasonFailedScheduling, "binding failure condition AttachFailed is True")
	})
	e.eventually("a fresh allocation without the failed status", func() bool {
		c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(e.t), "c")
		return err == nil && c.Status.Allocation != nil && len(c.Status.Devices) == 0 && c.ResourceVersion != first.ResourceVersion
	})
	e.waitAllocatedUnbound()
	e.setDeviceCondition("Attached")
	e.waitBound("p")
}

// The conditions not met within the scheduler's timeout: the allocation
// is released and the pod retried, with the wait's message.
func TestBindingConditionsTimeout(t *testing.T) {
	e := bindingEnv(t, func(c *scheduler.Config) { c.BindingConditionsTimeout = 300 * time.Millisecond })
	e.eventually("the timeout event", func() bool {
		return e.hasEvent("p", scheduler.ReasonFailedScheduling, "timed out waiting for binding conditions: claim c device")
	})
	if node := e.getPod("p").Spec.NodeName; node != "" {
		t.Fatalf("pod bound to %s", node)
	}
}

// Races while the pod waits: its claim deleted, its node removed (the
// device tainted: TestBindingConditionsTaint). Each ends the wait with
// the reason, and the pod is not bound.
func TestBindingConditionsRaces(t *testing.T) {
	t.Run("claim deleted", func(t *testing.T) {
		e := bindingEnv(t, nil)
		e.waitAllocatedUnbound()
		must(t, "delete claim", func() error {
			return e.c.ResourceClaimsV1(e.ns).Delete(callCtx(t), "c", metav1.DeleteOptions{})
		})
		e.eventually("the deletion's event", func() bool {
			return e.hasEvent("p", scheduler.ReasonFailedScheduling, "claim c is being deleted") ||
				e.hasEvent("p", scheduler.ReasonFailedScheduling, "claim c was deleted")
		})
		// No controller manager here removes the finalizer: the claim
		// stays, deallocated and unreserved, being deleted.
		e.eventually("the claim deallocated", func() bool {
			c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(t), "c")
			return apierrors.IsNotFound(err) || (err == nil && c.Status.Allocation == nil && len(c.Status.ReservedFor) == 0)
		})
		if node := e.getPod("p").Spec.NodeName; node != "" {
			t.Fatalf("pod bound to %s", node)
		}
	})
	t.Run("node gone", func(t *testing.T) {
		e := bindingEnv(t, nil)
		e.waitAllocatedUnbound()
		must(t, "delete node", func() error {
			return e.c.Nodes().Delete(callCtx(t), e.node("gpus"), metav1.DeleteOptions{})
		})
		e.eventually("the node's event", func() bool {
			return e.hasEvent("p", scheduler.ReasonFailedScheduling, "node "+e.node("gpus")+" was removed")
		})
		e.eventually("the allocation released", func() bool {
			c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(t), "c")
			return err == nil && c.Status.Allocation == nil
		})
		if node := e.getPod("p").Spec.NodeName; node != "" {
			t.Fatalf("pod bound to %s", node)
		}
	})
}

// Two schedulers race for the one GPU with binding conditions, each from
// its own view: the first step (claimsOnly) goes through the same
// allocation fence as a normal binding, so exactly one claim is
// allocated; the other pod waits for the device. Once the winner's
// condition is set it is bound.
func TestBindingConditionsTwoSchedulersOneDevice(t *testing.T) {
	var second scheduler.Config
	e := bindingCluster(t, func(c *scheduler.Config) { second = *c })
	second.SchedulerName = e.name + "-b"
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.Run(runCtx, second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second scheduler: %v", err)
		}
	})
	e.createPod(schedtest.MakePod("probe").Req("cpu", "100m").SchedulerName(second.SchedulerName))
	e.waitBound("probe")
	for i, name := range []string{"a", "b"} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: e.name}}}}}}
		must(t, "create claim "+name, func() error { _, err := e.c.ResourceClaimsV1(e.ns).Create(callCtx(t), claim); return err })
		b := claimPod(name, name)
		if i == 1 {
			b = b.SchedulerName(second.SchedulerName)
		}
		e.createPod(b)
	}
	allocated := func() []string {
		var out []string
		for _, name := range []string{"a", "b"} {
			c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(t), name)
			if err != nil {
				t.Fatalf("get claim %s: %v", name, err)
			}
			if c.Status.Allocation != nil {
				out = append(out, name)
			}
		}
		return out
	}
	var winner string
	e.eventually("one claim allocated, the other pod waiting for the device", func() bool {
		got := allocated()
		if len(got) > 1 {
			t.Fatalf("both claims allocated the one device: %v", got)
		}
		if len(got) != 1 {
			return false
		}
		winner = got[0]
		loser := map[string]string{"a": "b", "b": "a"}[winner]
		c := scheduler.PodScheduledCondition(e.getPod(loser))
		return c != nil && c.Status == corev1.ConditionFalse
	})
	if got := allocated(); len(got) != 1 {
		t.Fatalf("allocated claims %v", got)
	}
	must(t, "set Attached", func() error {
		for {
			c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(t), winner)
			if err != nil {
				return err
			}
			r := c.Status.Allocation.Devices.Results[0]
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: r.Driver, Pool: r.Pool, Device: r.Device,
				Conditions: []metav1.Condition{{Type: "Attached", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}}}
			_, err = e.c.ResourceClaimsV1(e.ns).UpdateStatus(callCtx(t), c)
			if !apierrors.IsConflict(err) {
				return err
			}
		}
	})
	e.waitBound(winner)
}

// The device tainted while the pod waits, by a DeviceTaintRule of either
// effect that keeps pods off it: the wait ends with the taint named, the
// allocation is released, and the pod then waits for the device.
func TestBindingConditionsTaint(t *testing.T) {
	for _, effect := range []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute} {
		tainted(t, effect)
	}
}

// tainted is the device-tainted race with a rule of that effect.
func tainted(t *testing.T, effect resourcev1.DeviceTaintEffect) {
	t.Run(string(effect), func(t *testing.T) {
		e := bindingEnv(t, nil)
		e.waitAllocatedUnbound()
		driver, pool := draDriver, e.node("gpus")
		rule := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: e.name},
			Spec: resourcev1.DeviceTaintRuleSpec{
				DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &driver, Pool: &pool},
				Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Effect: effect},
			}}
		must(t, "create rule", func() error { _, err := e.c.DeviceTaintRules().Create(callCtx(t), rule); return err })
		t.Cleanup(func() {
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = e.c.DeviceTaintRules().Delete(c, rule.Name, metav1.DeleteOptions{})
		})
		e.eventually("the taint's event", func() bool {
			return e.hasEvent("p", scheduler.ReasonFailedScheduling, "was tainted example.com/broken=:"+string(effect))
		})
		e.eventually("the allocation released", func() bool {
			c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(t), "c")
			return err == nil && c.Status.Allocation == nil
		})
		// The pod waits for the device, tainted now.
		e.waitMessage("p", "example.com/broken")
	})
}
