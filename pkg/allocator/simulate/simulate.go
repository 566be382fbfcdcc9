// Package simulate runs `allot simulate`: it takes decoded manifests (nodes,
// slices, classes, parameters, claims, claim templates, pods and vendor
// parameter objects), schedules the pending pods with the structured
// allocator, and returns the pods and claims as the control plane would
// store them, plus, given a node template, how many such nodes the pods
// that did not fit would need.
//
// It is a thin layer over allocator.Simulation. Its node-level filter
// (FilterNode: node exists, not unschedulable, node selector and required
// node affinity) stands in for the scheduler framework, which will replace
// it; taints, resources and every other plugin are not simulated. It does
// no I/O and is deterministic.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ReasonAllocationTimeout is the PodScheduled=False reason of a pod for
// which the search ran out of time on some node and fit no other: it was
// not proven unschedulable.
const ReasonAllocationTimeout = "AllocationTimeout"

// Options configure Run.
type Options struct {
	// Template, when set, is the node an autoscaler would add; Run then
	// computes how many are needed for the pods that did not fit.
	Template *allocator.NodeTemplate
	// MaxNodes bounds that count (default 100).
	MaxNodes int
}

// Output is the simulated cluster after scheduling.
type Output struct {
	// Pods are the input pods, in input order: scheduled ones with
	// spec.nodeName and PodScheduled=True, others with PodScheduled=False.
	Pods []*corev1.Pod
	// Claims are all claims, including generated ones, sorted.
	Claims []*resourceapi.ResourceClaim
	// Decisions record, per pending pod, the result on every node.
	Decisions []Decision
	// NodesNeeded is set when Options.Template is.
	NodesNeeded *allocator.NodesNeeded
	// Problems are defects found in the slices.
	Problems []allocator.Problem
	// Warnings are inputs that could not be honoured, such as a bound pod
	// whose claims do not fit its node.
	Warnings []string
	// Ignored counts input objects of kinds the simulation does not use.
	Ignored map[string]int
}

// Decision is how one pending pod was placed.
type Decision struct {
	Pod     string // namespace/name
	Node    string // empty when unscheduled
	Results []*allocator.Result
}

// Run schedules the pending pods among objs.
func Run(ctx context.Context, objs []runtime.Object, opts Options) (*Output, error) {
	snap, pods, ignored := Split(objs)
	sim := allocator.NewSimulation(snap, allocator.Options{NodeFilter: FilterNode})
	out := &Output{Ignored: ignored}
	for _, n := range sim.Nodes() {
		_, st, _ := sim.Node(n)
		out.Problems = append(out.Problems, st.Model().Problems()...)
	}
	var pending []*corev1.Pod
	for _, pod := range pods {
		p := sim.GenerateClaims(pod)
		if p.Spec.NodeName != "" {
			if _, err := sim.BindPod(ctx, p, p.Spec.NodeName); err != nil {
				if errors.Is(err, allocator.ErrDeadline) {
					return nil, fmt.Errorf("simulate: %w", err)
				}
				out.Warnings = append(out.Warnings, err.Error())
			}
			out.Pods = append(out.Pods, p)
			continue
		}
		d, err := schedule(ctx, sim, p)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		out.Decisions = append(out.Decisions, d)
		out.Pods = append(out.Pods, p)
		if d.Node == "" {
			pending = append(pending, p)
		}
	}
	out.Claims = sim.Claims()
	if opts.Template != nil {
		max := opts.MaxNodes
		if max <= 0 {
			max = 100
		}
		nn, err := sim.NodesNeeded(ctx, *opts.Template, pending, max)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		out.NodesNeeded = nn
	}
	return out, nil
}

// schedule places one pending pod on the node with the highest score (ties:
// node name), updating pod in place.
func schedule(ctx context.Context, sim *allocator.Simulation, pod *corev1.Pod) (Decision, error) {
	d := Decision{Pod: pod.Namespace + "/" + pod.Name}
	var best *allocator.Result
	timedOut := false
	for _, n := range sim.Nodes() {
		res, err := sim.Filter(ctx, pod, n)
		switch {
		case errors.Is(err, allocator.ErrDeadline):
			timedOut = true
			res = &allocator.Result{Node: n, Reasons: []allocator.Reason{{Message: err.Error()}}}
		case err != nil:
			return d, err
		}
		d.Results = append(d.Results, res)
		if res.Fits && (best == nil || res.Score > best.Score) {
			best = res
		}
	}
	if best == nil {
		reason := corev1.PodReasonUnschedulable
		if timedOut {
			reason = ReasonAllocationTimeout
		}
		setCondition(pod, corev1.ConditionFalse, reason, unschedulableMessage(d.Results))
		return d, nil
	}
	if _, err := sim.BindPod(ctx, pod, best.Node); err != nil {
		return d, err
	}
	d.Node = best.Node
	pod.Spec.NodeName = best.Node
	setCondition(pod, corev1.ConditionTrue, "", "")
	return d, nil
}

func setCondition(pod *corev1.Pod, status corev1.ConditionStatus, reason, msg string) {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason, Message: msg}
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
	if i < 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, cond)
		return
	}
	pod.Status.Conditions[i] = cond
}

// unschedulableMessage lists the reasons per node, nodes with the same
// reasons together: "0/2 nodes are available: worker-1, worker-2: ...".
func unschedulableMessage(results []*allocator.Result) string {
	var groups []string
	byMsg := map[string][]string{}
	for _, r := range results {
		msgs := make([]string, len(r.Reasons))
		for i, reason := range r.Reasons {
			msgs[i] = reason.Message
		}
		m := strings.Join(msgs, "; ")
		if _, ok := byMsg[m]; !ok {
			groups = append(groups, m)
		}
		byMsg[m] = append(byMsg[m], r.Node)
	}
	parts := make([]string, 0, len(groups))
	for _, m := range groups {
		parts = append(parts, strings.Join(byMsg[m], ", ")+": "+m)
	}
	msg := fmt.Sprintf("0/%d nodes are available", len(results))
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, ". ")
	}
	return msg + "."
}

// FilterNode is the simulation's node-level filter: the node must not be
// unschedulable and must match the pod's node selector and required node
// affinity. Whether the node has the drivers of the pod's claims is the
// allocator's check.
func FilterNode(pod *corev1.Pod, node *corev1.Node) []allocator.Reason {
	var out []allocator.Reason
	if node.Spec.Unschedulable {
		out = append(out, allocator.Reason{Code: allocator.ReasonNodeUnschedulable, Message: "node is unschedulable"})
	}
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			out = append(out, allocator.Reason{Code: allocator.ReasonNodeSelectorMismatch,
				Message: "node does not match the pod's nodeSelector"})
			break
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		if sel := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; sel != nil &&
			!allocator.MatchNodeSelector(sel, node, node.Name) {
			out = append(out, allocator.Reason{Code: allocator.ReasonNodeSelectorMismatch,
				Message: "node does not match the pod's required node affinity"})
		}
	}
	return out
}

// Split sorts decoded objects into a snapshot and the pods, counting the
// kinds it does not use (Namespaces, CRDs, ...).
func Split(objs []runtime.Object) (*allocator.Snapshot, []*corev1.Pod, map[string]int) {
	snap := &allocator.Snapshot{}
	var pods []*corev1.Pod
	ignored := map[string]int{}
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Node:
			snap.Nodes = append(snap.Nodes, v)
		case *resourceapi.NodeResourceSlice:
			snap.Slices = append(snap.Slices, v)
		case *resourceapi.ResourceClass:
			snap.Classes = append(snap.Classes, v)
		case *resourceapi.ResourceClassParameters:
			snap.ClassParameters = append(snap.ClassParameters, v)
		case *resourceapi.ResourceClaimParameters:
			snap.ClaimParameters = append(snap.ClaimParameters, v)
		case *resourceapi.ResourceClaim:
			snap.Claims = append(snap.Claims, v)
		case *resourceapi.ResourceClaimTemplate:
			snap.ClaimTemplates = append(snap.ClaimTemplates, v)
		case *corev1.Pod:
			pods = append(pods, v)
		case *unstructured.Unstructured:
			snap.VendorParameters = append(snap.VendorParameters, v)
		default:
			kind := o.GetObjectKind().GroupVersionKind().Kind
			if kind == "" {
				kind = fmt.Sprintf("%T", o)
			}
			ignored[kind]++
		}
	}
	return snap, pods, ignored
}
