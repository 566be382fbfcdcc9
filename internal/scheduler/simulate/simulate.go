// Package simulate runs `allot simulate`: it takes decoded manifests (nodes,
// slices, classes, parameters, claims, claim templates, pods and vendor
// parameter objects, and resource.k8s.io/v1 ResourceSlices, DeviceClasses,
// claims, claim templates and DeviceTaintRules mixed with them), schedules
// the pending pods, and returns the pods and the claims of both versions as
// the control plane would store them, plus, given a node template, how
// many such nodes the pods that did not fit would need.
//
// It lives under internal/scheduler because it runs the live scheduler's
// framework. What needs no scheduler is public, in pkg/allocator: seed
// 002's simulation interface (allocator.NewSimulation, NodesNeeded) and
// allocator.SplitObjects, which sorts manifest objects into a Snapshot and
// pods.
//
// Pods are scheduled by the scheduler's own framework
// (plugins.NewDefaultFramework, including the DynamicResources plugin) over
// an in-memory framework.Snapshot whose DynamicResources extension holds the
// DRA objects: the same code as the live scheduler, one pod at a time in
// input order. A placed pod is bound into the snapshot (Snapshot.WithPod)
// and its claims, allocated and reserved as the binding would leave them,
// replace the old ones in the extension. Pods that already have a node keep
// it; their claims are allocated there.
//
// Manifests rarely carry node status, so a Node without a Ready condition
// is simulated as Ready, and one whose allocatable does not say how many
// pods it takes gets kubelet's default of 110; cpu and memory are taken as
// written (absent means none).
//
// NodesNeeded still packs pods onto template copies with
// allocator.Simulation; its node filter runs the framework's filters other
// than DynamicResources on an empty copy of the template node (so the cpu
// and memory of pods packed onto the same new node are not added up).
// It does no I/O and is deterministic.
package simulate

import (
	"context"
	"fmt"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
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
	// Claims are all resource.k8s.io/v1alpha2 claims, including generated
	// ones, sorted.
	Claims []*resourceapi.ResourceClaim
	// V1Claims are the resource.k8s.io/v1 claims, including those
	// generated from v1 templates, sorted, with their allocations as a v1
	// claim's status carries them.
	V1Claims []*resourcev1.ResourceClaim
	// Decisions record, per pending pod, the result on every node.
	Decisions []Decision
	// NodesNeeded is set when Options.Template is.
	NodesNeeded *allocator.NodesNeeded
	// Problems are defects found in the slices.
	Problems []allocator.Problem
	// DeviceTaints are the taints DeviceTaintRules put on devices, one
	// line per device and rule ("driver/pool/device: key=value:effect
	// (DeviceTaintRule name)"), effect None included: what the rules did.
	DeviceTaints []string
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
	snap, pods, ignored := allocator.SplitObjects(objs)
	gen := allocator.NewSimulation(snap, allocator.Options{})
	for i, p := range pods {
		pods[i] = gen.GenerateClaims(p) // template claims of both versions, named POD-ENTRY
	}
	fw, err := plugins.NewDefaultFramework(plugins.Options{Parallelism: 1})
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	c := newCluster(snap, gen.Claims(), gen.V1Claims(), adminNamespaces(objs))
	out := &Output{Ignored: ignored}
	for _, n := range c.snap.Nodes() {
		out.Problems = append(out.Problems, c.objects().Model(n.Name()).Problems()...)
	}
	out.DeviceTaints = deviceTaints(snap)
	var pending []*corev1.Pod
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			if err := c.keepBound(ctx, fw, pod, out); err != nil {
				return nil, fmt.Errorf("simulate: %w", err)
			}
			out.Pods = append(out.Pods, pod)
			continue
		}
		d, err := c.schedule(ctx, fw, pod)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		out.Decisions = append(out.Decisions, d)
		out.Pods = append(out.Pods, pod)
		if d.Node == "" {
			pending = append(pending, pod)
		}
	}
	out.Claims = seedClaims(c.objects())
	out.V1Claims = c.objects().V1Claims()
	if opts.Template != nil {
		nn, err := c.nodesNeeded(ctx, snap, opts, pending)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		out.NodesNeeded = nn
	}
	return out, nil
}
