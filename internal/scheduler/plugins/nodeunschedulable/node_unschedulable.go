// Package nodeunschedulable is the NodeUnschedulable filter: a node whose
// spec.unschedulable is set (cordoned) takes no new pods, unless the pod
// tolerates the node.kubernetes.io/unschedulable:NoSchedule taint.
package nodeunschedulable

import (
	"context"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/tainttoleration"
)

// Name is the plugin's name.
const Name = "NodeUnschedulable"

// ErrReason is the rejection of a cordoned node.
const ErrReason = "node(s) were unschedulable"

// TaintKey is the taint a pod tolerates to run on cordoned nodes.
const TaintKey = "node.kubernetes.io/unschedulable"

// NodeUnschedulable is the plugin.
type NodeUnschedulable struct{}

var (
	_ framework.FilterPlugin      = &NodeUnschedulable{}
	_ framework.EnqueueExtensions = &NodeUnschedulable{}
)

// New returns the plugin.
func New() *NodeUnschedulable { return &NodeUnschedulable{} }

// Name implements framework.Plugin.
func (*NodeUnschedulable) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if !ni.Cordoned() {
		return nil // without reading the node object
	}
	return Fits(pod, ni.Node())
}

// Fits is the pure check.
func Fits(pod *corev1.Pod, node *corev1.Node) *framework.Status {
	if !node.Spec.Unschedulable {
		return nil
	}
	taint := corev1.Taint{Key: TaintKey, Effect: corev1.TaintEffectNoSchedule}
	if tainttoleration.Tolerates(pod.Spec.Tolerations, taint) {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason).
		WithDetail("spec.unschedulable is set (cordoned)")
}

// EventsToRegister implements framework.EnqueueExtensions: a new node,
// or a node that is no longer cordoned.
func (*NodeUnschedulable) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Update}, Hint: uncordoned},
	}
}

func uncordoned(_ *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if ok1 && ok2 && o.Spec.Unschedulable && !n.Spec.Unschedulable {
		return framework.Queue
	}
	return framework.QueueSkip
}
