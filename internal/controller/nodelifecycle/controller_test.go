package nodelifecycle

import (
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ready := func(beat time.Time) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(beat)}}
		return n
	}
	tests := map[string]struct {
		node  *corev1.Node
		stale bool
	}{
		"fresh heartbeat":       {ready(now.Add(-10 * time.Second)), false},
		"old heartbeat":         {ready(now.Add(-41 * time.Second)), true},
		"no condition, new":     {&corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now)}}, false},
		"no condition, old":     {&corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}, true},
		"zero heartbeat, young": {func() *corev1.Node { n := ready(time.Time{}); n.CreationTimestamp = metav1.NewTime(now); return n }(), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got, _ := Stale(tc.node, 40*time.Second, now); got != tc.stale {
				t.Fatalf("Stale = %v, want %v", got, tc.stale)
			}
		})
	}
}
