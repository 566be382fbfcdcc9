package tainttoleration

import (
	"context"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

const (
	noSchedule = corev1.TaintEffectNoSchedule
	noExecute  = corev1.TaintEffectNoExecute
	prefer     = corev1.TaintEffectPreferNoSchedule
	exists     = corev1.TolerationOpExists
	equal      = corev1.TolerationOpEqual
)

func TestFits(t *testing.T) {
	makePod, makeNode := schedtest.MakePod, schedtest.MakeNode
	tests := map[string]struct {
		pod        schedtest.PodBuilder
		node       schedtest.NodeBuilder
		want       framework.Code
		wantReason string
	}{
		"no taints":          {makePod("a"), makeNode("n"), framework.Success, ""},
		"untolerated":        {makePod("a"), makeNode("n").Taint("gpu", "true", noSchedule), framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {gpu: true}"},
		"untolerated exec":   {makePod("a"), makeNode("n").Taint("gpu", "", noExecute), framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {gpu: }"},
		"prefer is no limit": {makePod("a"), makeNode("n").Taint("gpu", "true", prefer), framework.Success, ""},
		"equal":              {makePod("a").Toleration("gpu", equal, "true", noSchedule), makeNode("n").Taint("gpu", "true", noSchedule), framework.Success, ""},
		"default op is equal": {makePod("a").Toleration("gpu", "", "true", ""),
			makeNode("n").Taint("gpu", "true", noSchedule), framework.Success, ""},
		"wrong value": {makePod("a").Toleration("gpu", equal, "false", noSchedule),
			makeNode("n").Taint("gpu", "true", noSchedule), framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {gpu: true}"},
		"exists any value": {makePod("a").Toleration("gpu", exists, "", noSchedule),
			makeNode("n").Taint("gpu", "x", noSchedule), framework.Success, ""},
		"wrong effect": {makePod("a").Toleration("gpu", exists, "", noSchedule),
			makeNode("n").Taint("gpu", "x", noExecute), framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {gpu: x}"},
		"one of two tolerated": {makePod("a").Toleration("a", exists, "", ""),
			makeNode("n").Taint("a", "", noSchedule).Taint("b", "", noSchedule), framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {b: }"},
		"wildcard": {makePod("a").Toleration("", exists, "", ""),
			makeNode("n").Taint("a", "", noSchedule).Taint("b", "", noExecute), framework.Success, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Fits(tc.pod.Obj(), tc.node.Obj())
			if st.Code() != tc.want {
				t.Fatalf("Fits = %v, want %v", st, tc.want)
			}
			if tc.wantReason != "" && st.Reasons()[0] != tc.wantReason {
				t.Fatalf("reason = %q, want %q", st.Reasons()[0], tc.wantReason)
			}
		})
	}
}

func TestScore(t *testing.T) {
	p := New()
	pod := schedtest.MakePod("a").Toleration("ok", exists, "", prefer).Obj()
	nodes := map[string]*corev1.Node{
		"clean":     schedtest.MakeNode("clean").Obj(),
		"tolerated": schedtest.MakeNode("tolerated").Taint("ok", "", prefer).Obj(),
		"one":       schedtest.MakeNode("one").Taint("bad", "", prefer).Obj(),
		"two":       schedtest.MakeNode("two").Taint("bad", "", prefer).Taint("worse", "", prefer).Obj(),
	}
	var scores []framework.NodeScore
	for _, name := range []string{"clean", "tolerated", "one", "two"} {
		s, _ := p.Score(context.Background(), framework.NewCycleState(), pod, framework.NewNodeInfo(nodes[name]))
		scores = append(scores, framework.NodeScore{Name: name, Score: s})
	}
	p.NormalizeScore(context.Background(), nil, pod, scores)
	want := []int64{100, 100, 50, 0}
	for i, s := range scores {
		if s.Score != want[i] {
			t.Errorf("%s: score %d, want %d", s.Name, s.Score, want[i])
		}
	}
}

func TestHint(t *testing.T) {
	hint := New().EventsToRegister()[0].Hint
	pod := schedtest.MakePod("a").Obj()
	tainted := schedtest.MakeNode("n").Taint("k", "", noSchedule).Obj()
	clean := schedtest.MakeNode("n").Obj()
	if hint(pod, tainted, clean) != framework.Queue || hint(pod, nil, clean) != framework.Queue {
		t.Error("a node the pod now tolerates should queue")
	}
	if hint(pod, clean, clean) != framework.QueueSkip || hint(pod, clean, tainted) != framework.QueueSkip {
		t.Error("no newly tolerated node should not queue")
	}
}
