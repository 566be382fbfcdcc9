package nodeready

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

func TestFits(t *testing.T) {
	makeNode := schedtest.MakeNode
	tests := map[string]struct {
		node       schedtest.NodeBuilder
		want       framework.Code
		wantDetail string
	}{
		"ready":        {makeNode("n"), framework.Success, ""},
		"not ready":    {makeNode("n").Ready(corev1.ConditionFalse), framework.UnschedulableAndUnresolvable, "Ready=False"},
		"unknown":      {makeNode("n").Ready(corev1.ConditionUnknown), framework.UnschedulableAndUnresolvable, "Ready=Unknown"},
		"no condition": {makeNode("n").NoConditions(), framework.UnschedulableAndUnresolvable, "no Ready condition reported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Fits(tc.node.Obj())
			if st.Code() != tc.want || st.Detail() != tc.wantDetail {
				t.Fatalf("Fits = %v (detail %q), want %v (%q)", st, st.Detail(), tc.want, tc.wantDetail)
			}
			if !st.IsSuccess() && st.Reasons()[0] != ErrReason {
				t.Fatalf("reasons = %v", st.Reasons())
			}
		})
	}
}

func TestHint(t *testing.T) {
	hint := New().EventsToRegister()[0].Hint
	pod := schedtest.MakePod("a").Obj()
	ready, notReady := schedtest.MakeNode("n").Obj(), schedtest.MakeNode("n").Ready(corev1.ConditionFalse).Obj()
	tests := map[string]struct {
		old, new any
		want     framework.QueueingHint
	}{
		"add ready":         {nil, ready, framework.Queue},
		"add not ready":     {nil, notReady, framework.QueueSkip},
		"becomes ready":     {notReady, ready, framework.Queue},
		"stays ready":       {ready, ready, framework.QueueSkip},
		"becomes not ready": {ready, notReady, framework.QueueSkip},
	}
	for name, tc := range tests {
		if got := hint(pod, tc.old, tc.new); got != tc.want {
			t.Errorf("%s: hint = %v, want %v", name, got, tc.want)
		}
	}
}
