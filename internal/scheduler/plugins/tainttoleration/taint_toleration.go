// Package tainttoleration is the TaintToleration plugin: a pod may run on
// a node only if it tolerates every NoSchedule and NoExecute taint there,
// and prefers nodes with fewer PreferNoSchedule taints it does not
// tolerate.
package tainttoleration

import (
	"context"
	"fmt"
	"slices"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "TaintToleration"

// ErrReasonFormat is the rejection: "node(s) had untolerated taint {KEY:
// VALUE}", as kube-scheduler words it, so nodes with the same taint are
// counted together.
const ErrReasonFormat = "node(s) had untolerated taint {%s: %s}"

// TaintToleration is the plugin.
type TaintToleration struct{}

var (
	_ framework.FilterPlugin      = &TaintToleration{}
	_ framework.ScorePlugin       = &TaintToleration{}
	_ framework.ScoreNormalizer   = &TaintToleration{}
	_ framework.EnqueueExtensions = &TaintToleration{}
)

// New returns the plugin.
func New() *TaintToleration { return &TaintToleration{} }

// Name implements framework.Plugin.
func (*TaintToleration) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return Fits(pod, ni.Node())
}

// Fits is the pure check: every NoSchedule and NoExecute taint of the
// node is tolerated.
func Fits(pod *corev1.Pod, node *corev1.Node) *framework.Status {
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !Tolerates(pod.Spec.Tolerations, t) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf(ErrReasonFormat, t.Key, t.Value)).
				WithDetail("taint %s=%s:%s", t.Key, t.Value, t.Effect)
		}
	}
	return nil
}

// Tolerates reports whether any toleration matches the taint.
func Tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return ToleratesTaint(tol, taint) })
}

// ToleratesTaint is Kubernetes' matching (corev1.Toleration.ToleratesTaint).
func ToleratesTaint(tol corev1.Toleration, taint corev1.Taint) bool { return tol.ToleratesTaint(taint) }

// Score implements framework.ScorePlugin: the number of PreferNoSchedule
// taints the pod does not tolerate (fewer is better; NormalizeScore turns
// it around).
func (*TaintToleration) Score(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return CountIntolerablePreferNoSchedule(pod, ni.Node()), nil
}

// CountIntolerablePreferNoSchedule is the pure part of Score. Only
// tolerations with an empty or PreferNoSchedule effect count.
func CountIntolerablePreferNoSchedule(pod *corev1.Pod, node *corev1.Node) int64 {
	var tols []corev1.Toleration
	for _, t := range pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			tols = append(tols, t)
		}
	}
	var n int64
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !Tolerates(tols, t) {
			n++
		}
	}
	return n
}

// NormalizeScore implements framework.ScoreNormalizer: the node with most
// intolerable taints scores 0, a node with none MaxNodeScore.
func (*TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	framework.NormalizeReverse(scores)
	return nil
}

// EventsToRegister implements framework.EnqueueExtensions: a new node, or
// a node whose taints changed so that the pod now tolerates them.
func (*TaintToleration) EventsToRegister() []framework.ClusterEventWithHint {
	hint := func(pod *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
		n, ok := newObj.(*corev1.Node)
		if !ok || !Fits(pod, n).IsSuccess() {
			return framework.QueueSkip
		}
		if o, ok := oldObj.(*corev1.Node); ok && Fits(pod, o).IsSuccess() {
			return framework.QueueSkip
		}
		return framework.Queue
	}
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.Update}, Hint: hint},
	}
}
