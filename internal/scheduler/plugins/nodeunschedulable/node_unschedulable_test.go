package nodeunschedulable

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

func TestFits(t *testing.T) {
	makePod, makeNode := schedtest.MakePod, schedtest.MakeNode
	tests := map[string]struct {
		pod  schedtest.PodBuilder
		node schedtest.NodeBuilder
		want framework.Code
	}{
		"schedulable node": {makePod("a"), makeNode("n"), framework.Success},
		"cordoned node":    {makePod("a"), makeNode("n").Unschedulable(), framework.UnschedulableAndUnresolvable},
		"tolerated": {makePod("a").Toleration(TaintKey, corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule),
			makeNode("n").Unschedulable(), framework.Success},
		"tolerates everything": {makePod("a").Toleration("", corev1.TolerationOpExists, "", ""),
			makeNode("n").Unschedulable(), framework.Success},
		"other toleration": {makePod("a").Toleration("x", corev1.TolerationOpExists, "", ""),
			makeNode("n").Unschedulable(), framework.UnschedulableAndUnresolvable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Fits(tc.pod.Obj(), tc.node.Obj())
			if st.Code() != tc.want {
				t.Fatalf("Fits = %v, want %v", st, tc.want)
			}
			if !st.IsSuccess() && st.Reasons()[0] != ErrReason {
				t.Fatalf("reasons = %v", st.Reasons())
			}
		})
	}
}

func TestUncordonedHint(t *testing.T) {
	cordoned, open := schedtest.MakeNode("n").Unschedulable().Obj(), schedtest.MakeNode("n").Obj()
	pod := schedtest.MakePod("a").Obj()
	if uncordoned(pod, cordoned, open) != framework.Queue {
		t.Error("uncordon should queue")
	}
	if uncordoned(pod, open, cordoned) != framework.QueueSkip || uncordoned(pod, open, open) != framework.QueueSkip {
		t.Error("cordon or no change should not queue")
	}
}
