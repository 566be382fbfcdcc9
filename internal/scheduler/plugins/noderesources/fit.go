// Package noderesources is the NodeResourcesFit plugin: a pod fits a node
// only if the node's allocatable cpu, memory, pods and scalar resources
// (extended resources such as example.com/gpu, by name) cover the pod's
// requests on top of what the pods already there request; an extended
// resource the node's allocatable lacks and a DeviceClass maps is left to
// the DynamicResources plugin (ServedByDRA). It also scores
// feasible nodes by how much would be left (LeastAllocated, spreading) or
// used (MostAllocated, packing).
package noderesources

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeResourcesFit"

// Rejections. A node short of several resources gives one reason each.
const (
	ErrReasonTooManyPods = "Too many pods"
	// ErrReasonInsufficientFormat is "Insufficient NAME".
	ErrReasonInsufficientFormat = "Insufficient %s"
)

// Strategy is how feasible nodes are scored.
type Strategy string

// Strategies.
const (
	// LeastAllocated prefers the node with the most left after placing
	// the pod: pods spread out.
	LeastAllocated Strategy = "LeastAllocated"
	// MostAllocated prefers the fullest node: pods pack together and
	// whole nodes stay free for big pods.
	MostAllocated Strategy = "MostAllocated"
)

// ParseStrategy accepts a strategy name, case-sensitively.
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case LeastAllocated, MostAllocated:
		return st, nil
	case "":
		return LeastAllocated, nil
	}
	return "", fmt.Errorf("unknown score strategy %q (want %s or %s)", s, LeastAllocated, MostAllocated)
}

// Fit is the plugin.
type Fit struct {
	strategy Strategy
}

var (
	_ framework.PreFilterPlugin   = &Fit{}
	_ framework.FilterPlugin      = &Fit{}
	_ framework.ScorePlugin       = &Fit{}
	_ framework.EnqueueExtensions = &Fit{}
)

// New returns the plugin scoring with strategy ("" is LeastAllocated).
func New(strategy Strategy) (*Fit, error) {
	s, err := ParseStrategy(string(strategy))
	if err != nil {
		return nil, err
	}
	return &Fit{strategy: s}, nil
}

// Name implements framework.Plugin.
func (*Fit) Name() string { return Name }

const stateKey framework.StateKey = Name + "/request"

// preFilterState is the pod's requests, computed once per cycle.
type preFilterState struct {
	request framework.Resource
	nonZero framework.Resource
	dra     DRAClasses // nil: no DRA objects in the snapshot
}

func (s *preFilterState) Clone() framework.StateData {
	return &preFilterState{request: s.request.Clone(), nonZero: s.nonZero.Clone(), dra: s.dra}
}

// PreFilter implements framework.PreFilterPlugin.
func (*Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, snap *framework.Snapshot) *framework.Status {
	st := &preFilterState{request: framework.PodRequests(pod), nonZero: framework.PodRequestsNonZero(pod)}
	if snap != nil {
		st.dra, _ = snap.Extension(draExtension).(DRAClasses)
	}
	state.Write(stateKey, st)
	return nil
}

func readState(state *framework.CycleState, pod *corev1.Pod) *preFilterState {
	if s, err := framework.ReadAs[*preFilterState](state, stateKey); err == nil {
		return s
	}
	return &preFilterState{request: framework.PodRequests(pod), nonZero: framework.PodRequestsNonZero(pod)}
}

// Filter implements framework.FilterPlugin.
func (*Fit) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	s := readState(state, pod)
	return FitsWithDRA(s.request, ni, s.dra)
}

// Fits is the pure check of a pod's request against a node. It names every
// resource that is short, and details the numbers.
func Fits(req framework.Resource, ni *framework.NodeInfo) *framework.Status {
	return FitsWithDRA(req, ni, nil)
}

// FitsWithDRA is Fits where DRA serves the extended resources that the
// node's allocatable lacks (no device plugin there advertises them) and
// that a DeviceClass maps (dra): those are the DynamicResources plugin's
// to judge. A node whose allocatable has the name serves it by its device
// plugin, and is judged here.
func FitsWithDRA(req framework.Resource, ni *framework.NodeInfo, dra DRAClasses) *framework.Status {
	alloc, used := ni.Allocatable(), ni.Requested()
	var reasons, details []string
	if int64(len(ni.Pods()))+1 > alloc.Pods {
		reasons = append(reasons, ErrReasonTooManyPods)
		details = append(details, fmt.Sprintf("pods: %d of %d in use", len(ni.Pods()), alloc.Pods))
	}
	short := func(name corev1.ResourceName, want, have, inUse int64) {
		if want > 0 && want > have-inUse {
			reasons = append(reasons, fmt.Sprintf(ErrReasonInsufficientFormat, name))
			details = append(details, fmt.Sprintf("%s: requested %s, free %s of %s",
				name, format(name, want), format(name, max(have-inUse, 0)), format(name, have)))
		}
	}
	short(corev1.ResourceCPU, req.MilliCPU, alloc.MilliCPU, used.MilliCPU)
	short(corev1.ResourceMemory, req.Memory, alloc.Memory, used.Memory)
	names := make([]string, 0, len(req.Scalar))
	for name := range req.Scalar {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		if ServedByDRA(name, alloc, dra) {
			continue
		}
		short(name, req.Scalar[name], alloc.Scalar[name], used.Scalar[name])
	}
	if len(reasons) == 0 {
		return nil
	}
	return framework.NewStatus(framework.Unschedulable, reasons...).WithDetail("%s", strings.Join(details, "; "))
}

// format prints an amount in the unit people write: cores for cpu,
// bytes with a binary suffix for memory, plain numbers otherwise.
func format(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		if v%1000 == 0 {
			return fmt.Sprint(v / 1000)
		}
		return fmt.Sprintf("%dm", v)
	case corev1.ResourceMemory:
		for _, u := range []struct {
			suffix string
			size   int64
		}{{"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v != 0 && v%u.size == 0 {
				return fmt.Sprintf("%d%s", v/u.size, u.suffix)
			}
		}
	}
	return fmt.Sprint(v)
}

// EventsToRegister implements framework.EnqueueExtensions: a node that
// arrives big enough or grows, and an assigned pod that goes away (or
// terminates) and frees what it held.
func (*Fit) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.Update}, Hint: nodeMayFit},
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}},
	}
}

// nodeMayFit queues the pod when the (new or grown) node could hold it
// were it empty; an update must also raise the allocatable of something
// the pod requests, so label or status heartbeats do not wake it.
func nodeMayFit(pod *corev1.Pod, oldObj, newObj any) framework.QueueingHint {
	n, ok := newObj.(*corev1.Node)
	if !ok {
		return framework.QueueSkip
	}
	req := framework.PodRequests(pod)
	if !Fits(req, framework.NewNodeInfo(n)).IsSuccess() {
		return framework.QueueSkip
	}
	o, ok := oldObj.(*corev1.Node)
	if !ok {
		return framework.Queue
	}
	before, after := framework.NewResource(o.Status.Allocatable), framework.NewResource(n.Status.Allocatable)
	grew := after.Pods > before.Pods ||
		(req.MilliCPU > 0 && after.MilliCPU > before.MilliCPU) ||
		(req.Memory > 0 && after.Memory > before.Memory)
	for name, v := range req.Scalar {
		grew = grew || (v > 0 && after.Scalar[name] > before.Scalar[name])
	}
	if grew {
		return framework.Queue
	}
	return framework.QueueSkip
}
