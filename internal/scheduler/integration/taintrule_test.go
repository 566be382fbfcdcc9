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
// pending with the taint named, in the scheduler and in explain; deleting
// the rule schedules the pod (the rule's event moves it; the safety net
// is an hour).
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
	must(t, "delete rule", func() error { return e.c.DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}) })
	if node := e.waitBound("p"); node != "gpus" {
		t.Fatalf("bound to %s", node)
	}
}
