package nodeaffinity

import (
	"context"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

func TestFits(t *testing.T) {
	makePod, makeNode := schedtest.MakePod, schedtest.MakeNode
	ssd := makeNode("n").Label("disk", "ssd").Label("zone", "a")
	tests := map[string]struct {
		pod        schedtest.PodBuilder
		node       schedtest.NodeBuilder
		want       framework.Code
		wantDetail string
	}{
		"no constraints":       {makePod("a"), makeNode("n"), framework.Success, ""},
		"selector matches":     {makePod("a").NodeSelector("disk", "ssd"), ssd, framework.Success, ""},
		"selector wrong value": {makePod("a").NodeSelector("disk", "hdd"), ssd, framework.UnschedulableAndUnresolvable, "nodeSelector disk=hdd: node has disk=ssd"},
		"selector no label":    {makePod("a").NodeSelector("gpu", "a100"), ssd, framework.UnschedulableAndUnresolvable, "nodeSelector gpu=a100: node has no label gpu"},
		"affinity In":          {makePod("a").RequiredAffinity("zone", corev1.NodeSelectorOpIn, "a", "b"), ssd, framework.Success, ""},
		"affinity NotIn": {makePod("a").RequiredAffinity("zone", corev1.NodeSelectorOpNotIn, "a"), ssd,
			framework.UnschedulableAndUnresolvable, "no term of the required node affinity matches the node's labels"},
		"terms are ORed": {makePod("a").RequiredAffinity("zone", corev1.NodeSelectorOpIn, "b").RequiredAffinity("disk", corev1.NodeSelectorOpExists),
			ssd, framework.Success, ""},
		"selector and affinity both needed": {makePod("a").NodeSelector("disk", "ssd").RequiredAffinity("zone", corev1.NodeSelectorOpIn, "b"),
			ssd, framework.UnschedulableAndUnresolvable, "no term of the required node affinity matches the node's labels"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Fits(tc.pod.Obj(), tc.node.Obj())
			if st.Code() != tc.want || st.Detail() != tc.wantDetail {
				t.Fatalf("Fits = %v (detail %q), want %v (%q)", st, st.Detail(), tc.want, tc.wantDetail)
			}
			if !st.IsSuccess() && st.Reasons()[0] != ErrReason {
				t.Fatalf("reasons = %v", st.Reasons())
			}
		})
	}
}

func TestPreFilterSkips(t *testing.T) {
	p := New()
	ctx, state := context.Background(), framework.NewCycleState()
	if st := p.PreFilter(ctx, state, schedtest.MakePod("a").Obj(), nil); !st.IsSkip() {
		t.Errorf("pod without constraints: PreFilter = %v, want Skip", st)
	}
	if st := p.PreFilter(ctx, state, schedtest.MakePod("a").NodeSelector("k", "v").Obj(), nil); !st.IsSuccess() {
		t.Errorf("pod with selector: PreFilter = %v, want Success", st)
	}
}

func TestPreferredScore(t *testing.T) {
	pod := schedtest.MakePod("a").PreferredAffinity(10, "zone", "a").PreferredAffinity(30, "disk", "ssd").Obj()
	nodes := map[string]int64{}
	for name, n := range map[string]*corev1.Node{
		"both": schedtest.MakeNode("both").Label("zone", "a").Label("disk", "ssd").Obj(),
		"zone": schedtest.MakeNode("zone").Label("zone", "a").Obj(),
		"none": schedtest.MakeNode("none").Obj(),
	} {
		nodes[name] = PreferredScore(pod, n)
	}
	if nodes["both"] != 40 || nodes["zone"] != 10 || nodes["none"] != 0 {
		t.Fatalf("scores = %v", nodes)
	}
	scores := []framework.NodeScore{{Name: "both", Score: 40}, {Name: "zone", Score: 10}, {Name: "none"}}
	New().NormalizeScore(context.Background(), nil, pod, scores)
	if scores[0].Score != 100 || scores[1].Score != 25 || scores[2].Score != 0 {
		t.Fatalf("normalized = %v", scores)
	}
}

func TestHint(t *testing.T) {
	hint := New().EventsToRegister()[0].Hint
	pod := schedtest.MakePod("a").NodeSelector("disk", "ssd").Obj()
	plain, ssd := schedtest.MakeNode("n").Obj(), schedtest.MakeNode("n").Label("disk", "ssd").Obj()
	other := schedtest.MakeNode("n").Label("color", "red").Obj()
	if hint(pod, plain, ssd) != framework.Queue || hint(pod, nil, ssd) != framework.Queue {
		t.Error("a node that starts matching should queue")
	}
	if hint(pod, plain, other) != framework.QueueSkip || hint(pod, ssd, ssd) != framework.QueueSkip {
		t.Error("an unrelated label change should not queue")
	}
}
