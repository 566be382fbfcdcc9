// Package nodename is the NodeName filter: a pod that names a node in
// spec.nodeName fits only that node.
package nodename

import (
	"context"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeName"

// ErrReason is the rejection of every other node.
const ErrReason = "node(s) didn't match the requested node name"

// NodeName is the plugin.
type NodeName struct{}

var (
	_ framework.FilterPlugin      = &NodeName{}
	_ framework.EnqueueExtensions = &NodeName{}
)

// New returns the plugin.
func New() *NodeName { return &NodeName{} }

// Name implements framework.Plugin.
func (*NodeName) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return Fits(pod, ni.Node())
}

// Fits is the pure check: spec.nodeName is empty or names node.
func Fits(pod *corev1.Pod, node *corev1.Node) *framework.Status {
	if pod.Spec.NodeName == "" || pod.Spec.NodeName == node.Name {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason).
		WithDetail("the pod asks for node %q", pod.Spec.NodeName)
}

// EventsToRegister implements framework.EnqueueExtensions: only the
// arrival of the named node helps.
func (*NodeName) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{{
		Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add},
		Hint: func(pod *corev1.Pod, _, newObj any) framework.QueueingHint {
			if n, ok := newObj.(*corev1.Node); ok && Fits(pod, n).IsSuccess() {
				return framework.Queue
			}
			return framework.QueueSkip
		},
	}}
}
