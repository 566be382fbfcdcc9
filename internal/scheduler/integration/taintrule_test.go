package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/plugins"
)

// A DeviceTaintRule with effect NoSchedule that selects every GPU of the
// node (driver, and the node as the seed pool) keeps a seed claim's pod
// pending with the taint and its rule named, in the scheduler and in
// explain, and a v1 claim's pod that does not tolerate the taint, while a
// tolerating v1 claim gets a GPU; deleting the rule schedules the waiting
// pods (the rule's event moves them; the safety net is an hour).
func TestDRATaintRuleNoSchedule(t *testing.T) {
	e := draSetup(t)
	ctx := callCtx(t)
	driver, pool := draDriver, e.node("gpus")
	rule := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &driver, Pool: &pool},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Value: "firmware", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		}}
	must(t, "create rule", func() error { _, err := e.c.DeviceTaintRules().Create(ctx, rule); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.DeviceTaintRules().Delete(c, rule.Name, metav1.DeleteOptions{})
	})
	e.createClaim("c")
	e.createPod(claimPod("p", "c"))
	msg := e.waitUnschedulable("p")
	want := "example.com/maintenance=firmware:NoSchedule (DeviceTaintRule " + rule.Name + ")"
	if !strings.Contains(msg, want) {
		t.Fatalf("message %q does not name the taint %q", msg, want)
	}
	snap, err := scheduler.ListSnapshot(context.Background(), e.c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := plugins.NewDefaultFramework(plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := scheduler.Explain(ctx, fw, snap, e.getPod("p")); !strings.Contains(d.Message(), want) {
		t.Errorf("explain: %q, want %q", d.Message(), want)
	}

	// The same GPUs as resource.k8s.io/v1 devices: a v1 claim that does
	// not tolerate the taint waits too, with the taint named; one that
	// tolerates it is allocated.
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + draDriver + `"`}}}}}
	must(t, "create device class", func() error { _, err := e.c.DeviceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.DeviceClasses().Delete(c, class.Name, metav1.DeleteOptions{})
	})
	v1Claim := func(name string, tols ...resourcev1.DeviceToleration) {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name, Tolerations: tols}}}}}}
		must(t, "create v1 claim "+name, func() error { _, err := e.c.ResourceClaimsV1(e.ns).Create(ctx, c); return err })
	}
	v1Claim("v1")
	v1Claim("v1-tolerant", resourcev1.DeviceToleration{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpExists})
	e.createPod(claimPod("v1", "v1"))
	wantV1 := "example.com/maintenance=firmware:NoSchedule on " + pool + "/gpu-"
	if msg := e.waitUnschedulable("v1"); !strings.Contains(msg, wantV1) {
		t.Fatalf("v1 message %q does not name the taint %q", msg, wantV1)
	}
	if snap, err = scheduler.ListSnapshot(context.Background(), e.c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := scheduler.Explain(ctx, fw, snap, e.getPod("v1")); !strings.Contains(d.Message(), wantV1) {
		t.Errorf("explain of the v1 pod: %q, want %q", d.Message(), wantV1)
	}
	e.createPod(claimPod("v1-tolerant", "v1-tolerant"))
	if node := e.waitBound("v1-tolerant"); node != "gpus" {
		t.Fatalf("tolerating v1 pod bound to %s", node)
	}

	must(t, "delete rule", func() error { return e.c.DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}) })
	for _, p := range []string{"p", "v1"} {
		if node := e.waitBound(p); node != "gpus" {
			t.Fatalf("%s bound to %s", p, node)
		}
	}
}
