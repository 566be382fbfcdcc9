package allocator

import (
	"context"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// taintRule is a DeviceTaintRule selecting by driver, pool and device
// ("" leaves a field unset).
func taintRule(name, driver, pool, device string, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: opt(driver), Pool: opt(pool), Device: opt(device)},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Value: name, Effect: effect},
		}}
}

func TestTaintRuleSelects(t *testing.T) {
	for name, tc := range map[string]struct {
		rule *resourcev1.DeviceTaintRule
		want bool
	}{
		"empty selector selects all": {taintRule("r", "", "", "", resourcev1.DeviceTaintEffectNoSchedule), true},
		"driver":                     {taintRule("r", "gpu", "", "", resourcev1.DeviceTaintEffectNoSchedule), true},
		"other driver":               {taintRule("r", "nic", "", "", resourcev1.DeviceTaintEffectNoSchedule), false},
		"driver pool device":         {taintRule("r", "gpu", "node-1", "gpu-0", resourcev1.DeviceTaintEffectNoSchedule), true},
		"other pool":                 {taintRule("r", "gpu", "node-2", "", resourcev1.DeviceTaintEffectNoSchedule), false},
		"other device":               {taintRule("r", "", "", "gpu-1", resourcev1.DeviceTaintEffectNoSchedule), false},
		"no selector selects none": {&resourcev1.DeviceTaintRule{Spec: resourcev1.DeviceTaintRuleSpec{
			Taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := TaintRuleSelects(tc.rule, "gpu", "node-1", "gpu-0"); got != tc.want {
				t.Errorf("TaintRuleSelects = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTaintRulesSeed: a NoSchedule rule on a seed leaf keeps it from seed
// claims, explain names the rule; None changes nothing; the v1 projection
// carries the taint, which a v1 request may tolerate.
func TestTaintRulesSeed(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	p := &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{
		{Name: "gpu-0", Attributes: []resourceapi.Attribute{quantityAttr("memory", "32Gi")}},
		{Name: "gpu-1", Attributes: []resourceapi.Attribute{quantityAttr("memory", "32Gi")}},
	}}
	sl := []*resourceapi.NodeResourceSlice{makeSlice("node-1", "gpu", p)}
	claim := makeClaim("c", "gpu", `quantities["memory"] >= "16Gi"`)
	two := makeClaim("c2", "gpu", `quantities["memory"] >= "16Gi"`, `quantities["memory"] >= "16Gi"`)
	allocate := func(rules []*resourcev1.DeviceTaintRule, c Claim) *Result {
		t.Helper()
		m := NewModelTainted("node-1", sl, rules)
		res, err := Allocate(context.Background(), Prepare(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}, []Claim{c}), NewNodeState(m, node, nil))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one := []*resourcev1.DeviceTaintRule{taintRule("drain-0", "gpu", "node-1", "gpu-0", resourcev1.DeviceTaintEffectNoSchedule)}
	if res := allocate(one, claim); !res.Fits || res.Allocations[0].ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID != "gpu-1" {
		t.Errorf("one leaf tainted: want gpu-1, got fits=%v %v", res.Fits, res.Reasons)
	}
	res := allocate(one, two)
	if res.Fits || len(res.Reasons) == 0 {
		t.Fatalf("two leaves, one tainted: fits")
	}
	if r := res.Reasons[0]; r.Code != ReasonNotEnough {
		t.Errorf("two leaves, one tainted: want %s, got %+v", ReasonNotEnough, r)
	}
	all := []*resourcev1.DeviceTaintRule{taintRule("drain", "gpu", "", "", resourcev1.DeviceTaintEffectNoSchedule)}
	res = allocate(all, claim)
	if res.Fits || res.Reasons[0].Code != ReasonTainted ||
		res.Reasons[0].Clause != "example.com/maintenance=drain:NoSchedule (DeviceTaintRule drain)" {
		t.Errorf("all tainted: want %s naming the taint, got %+v", ReasonTainted, res.Reasons)
	}
	if !strings.Contains(res.Reasons[0].Message, "2 tainted by DeviceTaintRules") {
		t.Errorf("explain: %q", res.Reasons[0].Message)
	}
	none := []*resourcev1.DeviceTaintRule{taintRule("note", "gpu", "", "", resourcev1.DeviceTaintEffectNone)}
	if res := allocate(none, two); !res.Fits {
		t.Errorf("effect None: %v", res.Reasons)
	}

	// v1 over the same leaves: the projection carries the taint.
	inv := NewInventoryTainted(nil, sl, nil, all)
	var taints int
	for _, p := range inv.Pools() {
		for _, d := range p.Devices {
			taints += len(d.Taints)
		}
	}
	if taints != 2 {
		t.Fatalf("projected devices carry %d taints, want 2", taints)
	}
	st := NewState(inv, nil, nil)
	req := v1tExact("r", "any", 1)
	if res := v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("v", req))...); res.Fits || res.Reasons[0].Code != ReasonTainted {
		t.Errorf("v1 without toleration: %+v", res.Reasons)
	}
	tol := v1tTolerate(v1tExact("r", "any", 1), resourcev1.DeviceToleration{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpExists})
	if res := v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("v", tol))...); !res.Fits {
		t.Errorf("v1 tolerating: %+v", res.Reasons)
	}
}

// TestTaintRulesV1: rules taint published v1 devices by driver, pool and
// name, without changing the slices.
func TestTaintRulesV1(t *testing.T) {
	node := v1tNode("node-1")
	sl := v1tSlice("s", "gpu.example.com", "pool-1", "node-1", v1tGPUs(2, "a100")...)
	rules := []*resourcev1.DeviceTaintRule{
		taintRule("drain", "gpu.example.com", "pool-1", sl.Spec.Devices[0].Name, resourcev1.DeviceTaintEffectNoSchedule),
		taintRule("note", "", "", "", resourcev1.DeviceTaintEffectNone),
	}
	inv := NewInventoryTainted([]*resourcev1.ResourceSlice{sl}, nil, nil, rules)
	if len(sl.Spec.Devices[0].Taints) != 0 {
		t.Fatal("the slice was modified")
	}
	devs := inv.Pools()[0].Devices
	if len(devs[0].Taints) != 2 || len(devs[1].Taints) != 1 {
		t.Fatalf("taints: %v / %v", devs[0].Taints, devs[1].Taints)
	}
	st := NewState(inv, nil, nil)
	res := v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("v", v1tExact("r", "gpu", 2)))...)
	if res.Fits || res.Reasons[0].Code != ReasonTainted || !strings.Contains(res.Reasons[0].Clause, "example.com/maintenance=drain:NoSchedule") {
		t.Errorf("two devices, one tainted: %+v", res.Reasons)
	}
	if res := v1tAllocate(t, st, node, nil, v1tClaims(v1tClaim("v", v1tExact("r", "gpu", 1)))...); !res.Fits {
		t.Errorf("one device: %+v", res.Reasons)
	}
}
