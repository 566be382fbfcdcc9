package dynamicresources_test

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// noSchedule is a NoSchedule DeviceTaintRule on one device of driver.
func noSchedule(pool, dev string) *resourcev1.DeviceTaintRule {
	d := driver
	return &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "drain", UID: "r1", ResourceVersion: "1"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &d, Pool: &pool, Device: &dev},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		}}
}

// Lists.TaintRules taint the node's seed GPUs for the seed path; Next
// keeps the compiled models while the rules are the same objects and
// recompiles them when the rules change.
func TestTaintRulesReachTheModels(t *testing.T) {
	n1 := schedtest.MakeNode("n1").Obj()
	rule := noSchedule("n1", "gpu-0")
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

// TestTaintRulesBeforeTheFirstV1Claim: a NoSchedule rule listed while no
// v1 claim exists (the inventory then leaves seed slices out) still
// taints the device once the first v1 claim event brings the full
// inventory: a pod's v1 claim gets the other GPU, and a claim for both
// does not fit. For the seed GPUs seen as v1 devices and for a v1
// slice's.
func TestTaintRulesBeforeTheFirstV1Claim(t *testing.T) {
	for name, lists := range map[string]func() dynamicresources.Lists{
		"seed GPUs": func() dynamicresources.Lists { return mixedLists(t, nil) },
		"v1 GPUs":   func() dynamicresources.Lists { return v1GPUs() },
	} {
		t.Run(name, func(t *testing.T) {
			l := lists()
			l.TaintRules = []*resourcev1.DeviceTaintRule{noSchedule("n1", "gpu-0")}
			o := dynamicresources.NewObjects(l)
			o = o.WithClaimChanges("30", dynamicresources.ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/one": v1Claim("one"), "default/pair": v1Pair("pair")}})
			snap := framework.NewSnapshot([]*corev1.Node{schedtest.MakeNode("n1").Obj()}, nil).WithExtension(dynamicresources.Name, o)
			p := dynamicresources.New()
			if _, st := cycle(t, p, snap, podUsing("both", "pair")); st.Code() != framework.Unschedulable {
				t.Errorf("a claim for both GPUs, gpu-0 tainted: %s %q, want Unschedulable", st.Code(), st.Message())
			}
			state, st := cycle(t, p, snap, podUsing("single", "one"))
			if !st.IsSuccess() {
				t.Fatalf("a claim for one GPU: %s %q", st.Code(), st.Message())
			}
			res := dynamicresources.ResultV1(state, "n1")
			if res == nil || len(res.Allocations) != 1 || res.Allocations[0] == nil {
				t.Fatalf("no allocation for claim one: %+v", res)
			}
			if got := res.Allocations[0].Devices.Results[0].Device; got != "gpu-1" {
				t.Errorf("claim one got %s, want gpu-1 (gpu-0 is tainted NoSchedule)", got)
			}
		})
	}
}
