// Package nodeaffinity is the NodeAffinity plugin: a pod fits only nodes
// whose labels match its spec.nodeSelector and its required node affinity,
// and prefers nodes that match its preferred node affinity terms.
package nodeaffinity

import (
	"context"
	"sort"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeAffinity"

// ErrReason is the rejection, for the node selector and required node
// affinity alike (as kube-scheduler words it).
const ErrReason = "node(s) didn't match Pod's node affinity/selector"

// NodeAffinity is the plugin.
type NodeAffinity struct{}

var (
	_ framework.PreFilterPlugin   = &NodeAffinity{}
	_ framework.FilterPlugin      = &NodeAffinity{}
	_ framework.ScorePlugin       = &NodeAffinity{}
	_ framework.ScoreNormalizer   = &NodeAffinity{}
	_ framework.EnqueueExtensions = &NodeAffinity{}
)

// New returns the plugin.
func New() *NodeAffinity { return &NodeAffinity{} }

// Name implements framework.Plugin.
func (*NodeAffinity) Name() string { return Name }

const stateKey framework.StateKey = Name + "/selectorKeys"

// selectorKeys are the pod's nodeSelector keys, sorted once per cycle so
// that the detail names the same label on every node.
type selectorKeys []string

func (k selectorKeys) Clone() framework.StateData { return k } // immutable

// PreFilter implements framework.PreFilterPlugin: a pod without a node
// selector or required affinity skips Filter.
func (*NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ *framework.Snapshot) *framework.Status {
	if len(pod.Spec.NodeSelector) == 0 && required(pod) == nil {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(stateKey, sortedKeys(pod))
	return nil
}

// Filter implements framework.FilterPlugin.
func (*NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	keys, err := framework.ReadAs[selectorKeys](state, stateKey)
	if err != nil {
		keys = sortedKeys(pod)
	}
	return fits(keys, pod, ni.Node())
}

func sortedKeys(pod *corev1.Pod) selectorKeys {
	keys := make([]string, 0, len(pod.Spec.NodeSelector))
	for k := range pod.Spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Fits is the pure check: every nodeSelector label matches, and the
// required node affinity (if any) matches. The detail names the first
// label that differs.
func Fits(pod *corev1.Pod, node *corev1.Node) *framework.Status {
	return fits(sortedKeys(pod), pod, node)
}

func fits(keys selectorKeys, pod *corev1.Pod, node *corev1.Node) *framework.Status {
	for _, k := range keys {
		want := pod.Spec.NodeSelector[k]
		got, ok := node.Labels[k]
		switch {
		case !ok:
			return reject("nodeSelector %s=%s: node has no label %s", k, want, k)
		case got != want:
			return reject("nodeSelector %s=%s: node has %s=%s", k, want, k, got)
		}
	}
	if sel := required(pod); sel != nil && !sel.Matches(node.Name, node.Labels) {
		return reject("no term of the required node affinity matches the node's labels")
	}
	return nil
}

func reject(format string, args ...any) *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason).WithDetail(format, args...)
}

func required(pod *corev1.Pod) *corev1.NodeSelector {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// Score implements framework.ScorePlugin: the sum of the weights of the
// preferred node affinity terms that match the node.
func (*NodeAffinity) Score(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return PreferredScore(pod, ni.Node()), nil
}

// PreferredScore is the pure part of Score.
func PreferredScore(pod *corev1.Pod, node *corev1.Node) int64 {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return 0
	}
	var sum int64
	for _, t := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if t.Weight > 0 && t.Preference.Matches(node.Name, node.Labels) {
			sum += int64(t.Weight)
		}
	}
	return sum
}

// NormalizeScore implements framework.ScoreNormalizer.
func (*NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	framework.NormalizeMax(scores)
	return nil
}

// EventsToRegister implements framework.EnqueueExtensions: a node that
// arrives matching, or whose labels change so that it matches.
func (*NodeAffinity) EventsToRegister() []framework.ClusterEventWithHint {
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
