package dynamicresources_test

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// Lists.TaintRules taint the node's seed GPUs for the seed path; Next
// keeps the compiled models while the rules are the same objects and
// recompiles them when the rules change.
func TestTaintRulesReachTheModels(t *testing.T) {
	n1 := schedtest.MakeNode("n1").Obj()
	d, pool, dev := driver, "n1", "gpu-0"
	rule := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "drain", UID: "r1", ResourceVersion: "1"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &d, Pool: &pool, Device: &dev},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		}}
	l := baseLists(t)
	untainted := dynamicresources.NewObjects(l).NodeState(n1).Capacity()
	l.TaintRules = []*resourcev1.DeviceTaintRule{rule}
	o := dynamicresources.NewObjects(l)
	if got := o.NodeState(n1).Capacity(); got != untainted-1 {
		t.Fatalf("capacity with gpu-0 tainted: %d, want %d", got, untainted-1)
	}
	m := o.Model("n1")
	if o.Next(l).Model("n1") != m {
		t.Error("Next recompiled the model under the same rules")
	}
	l.TaintRules = nil
	next := o.Next(l)
	if next.Model("n1") == m || next.NodeState(n1).Capacity() != untainted {
		t.Error("Next kept the tainted model after the rule was deleted")
	}
}
