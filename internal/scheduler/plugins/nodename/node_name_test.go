package nodename

import (
	"testing"

	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

func TestFits(t *testing.T) {
	tests := map[string]struct {
		pod  schedtest.PodBuilder
		want framework.Code
	}{
		"no node name":     {makePod("a"), framework.Success},
		"this node":        {makePod("a").Node("n1"), framework.Success},
		"another node":     {makePod("a").Node("n2"), framework.UnschedulableAndUnresolvable},
		"empty is any one": {makePod("a").Node(""), framework.Success},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Fits(tc.pod.Obj(), makeNode("n1").Obj())
			if st.Code() != tc.want {
				t.Fatalf("Fits = %v, want %v", st, tc.want)
			}
			if !st.IsSuccess() && st.Reasons()[0] != ErrReason {
				t.Fatalf("reasons = %v, want %q", st.Reasons(), ErrReason)
			}
		})
	}
}

func TestEventsToRegister(t *testing.T) {
	reg := New().EventsToRegister()
	pod := makePod("a").Node("n2").Obj()
	if got := reg[0].Hint(pod, nil, makeNode("n1").Obj()); got != framework.QueueSkip {
		t.Errorf("hint for another node = %v, want QueueSkip", got)
	}
	if got := reg[0].Hint(pod, nil, makeNode("n2").Obj()); got != framework.Queue {
		t.Errorf("hint for the named node = %v, want Queue", got)
	}
}
