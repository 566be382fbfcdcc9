// Package nodeready is the NodeReady filter: a node whose Ready condition
// is not True (its node agent stopped heartbeating, or never started)
// takes no pods.
package nodeready

import (
	"context"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeReady"

// ErrReason is the rejection of a node that is not ready.
const ErrReason = "node(s) were not ready"

// NodeReady is the plugin.
type NodeReady struct{}

var (
	_ framework.FilterPlugin      = &NodeReady{}
	_ framework.EnqueueExtensions = &NodeReady{}
)

// New returns the plugin.
func New() *NodeReady { return &NodeReady{} }

// Name implements framework.Plugin.
func (*NodeReady) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeReady) Filter(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if ni.Ready() {
		return nil // without reading the node object
	}
	return Fits(ni.Node())
}

// Fits is the pure check: the node's Ready condition is True.
func Fits(node *corev1.Node) *framework.Status {
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return nil
		}
		st := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
		if c.Reason != "" {
			return st.WithDetail("Ready=%s (%s)", c.Status, c.Reason)
		}
		return st.WithDetail("Ready=%s", c.Status)
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason).
		WithDetail("no Ready condition reported")
}

// Ready reports whether the node's Ready condition is True.
func Ready(node *corev1.Node) bool { return Fits(node).IsSuccess() }

// EventsToRegister implements framework.EnqueueExtensions: a node that
// arrives ready or becomes ready.
func (*NodeReady) EventsToRegister() []framework.ClusterEventWithHint {
	becameReady := func(_ *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
		n, ok := newObj.(*corev1.Node)
		if !ok || !Ready(n) {
			return framework.QueueSkip
		}
		if o, ok := oldObj.(*corev1.Node); ok && Ready(o) {
			return framework.QueueSkip
		}
		return framework.Queue
	}
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.Update}, Hint: becameReady},
	}
}
