package auth

import (
	"context"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
)

// The controller manager sets and clears the node lifecycle taints
// (unreachable, not-ready) and nothing else of a Node's spec; a node may
// not set them on itself; users never.
func TestNodeLifecycleTaints(t *testing.T) {
	n1 := makeNode("n1")
	unreachable := withTaint(n1, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	notReady := withTaint(n1, corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)
	oos := withTaint(n1, OutOfServiceTaint, corev1.TaintEffectNoExecute)
	both := withTaint(unreachable, OutOfServiceTaint, corev1.TaintEffectNoExecute)
	cordoned := unreachable.DeepCopy()
	cordoned.Spec.Unschedulable = true
	relabelled := unreachable.DeepCopy()
	relabelled.Labels = map[string]string{"zone": "b"}
	for name, tc := range map[string]struct {
		u        User
		obj, old *corev1.Node
		allowed  bool
	}{
		"cm adds unreachable":            {cm, unreachable, n1, true},
		"cm clears unreachable":          {cm, n1, unreachable, true},
		"cm swaps to not-ready":          {cm, notReady, unreachable, true},
		"cm adds out-of-service":         {cm, oos, n1, false},
		"cm clears out-of-service":       {cm, unreachable, both, false},
		"cm taints and cordons":          {cm, cordoned, n1, false},
		"cm taints and relabels":         {cm, relabelled, n1, false},
		"node taints itself unreachable": {node1, unreachable, n1, false},
		"user taints a node":             {alice, unreachable, n1, false},
	} {
		t.Run(name, func(t *testing.T) {
			a := req(tc.u, "update", "nodes").cluster().named("n1").object(tc.obj).oldObject(tc.old)
			d := Authorize(context.Background(), Attributes(a), testLookup())
			if d.Allowed != tc.allowed {
				t.Fatalf("allowed=%v, want %v (%s)", d.Allowed, tc.allowed, d.Reason)
			}
		})
	}
}
