package simulate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultPods is kubelet's default pod capacity, given to simulated nodes
// whose allocatable does not say.
const defaultPods = 110

// cluster is the simulated cluster: a framework snapshot whose
// DynamicResources extension holds the DRA objects.
type cluster struct {
	snap *framework.Snapshot
}

func newCluster(snap *allocator.Snapshot, claims []*resourceapi.ResourceClaim, v1Claims []*resourcev1.ResourceClaim, admin map[string]bool) *cluster {
	nodes := make([]*corev1.Node, len(snap.Nodes))
	for i, n := range snap.Nodes {
		nodes[i] = simulatedNode(n)
	}
	objs := dynamicresources.NewObjects(dynamicresources.Lists{
		Slices: snap.Slices, Classes: snap.Classes, ClassParameters: snap.ClassParameters,
		ClaimParameters: snap.ClaimParameters, Claims: claims, Vendor: snap.VendorParameters,
		V1Slices: snap.V1Slices, DeviceClasses: snap.DeviceClasses, V1Claims: v1Claims, AdminNamespaces: admin,
		TaintRules: snap.TaintRules,
	})
	return &cluster{snap: framework.NewSnapshot(nodes, nil).WithExtension(dynamicresources.Name, objs)}
}

func (c *cluster) objects() *dynamicresources.Objects {
	return c.snap.Extension(dynamicresources.Name).(*dynamicresources.Objects)
}

// simulatedNode fills in the status manifests usually leave out: Ready,
// and a pod capacity.
func simulatedNode(n *corev1.Node) *corev1.Node {
	hasReady := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	_, hasPods := n.Status.Allocatable[corev1.ResourcePods]
	if hasReady && hasPods {
		return n
	}
	n = n.DeepCopy()
	if !hasReady {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
	}
	if !hasPods {
		if n.Status.Allocatable == nil {
			n.Status.Allocatable = corev1.ResourceList{}
		}
		n.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(defaultPods, resource.DecimalSI)
	}
	return n
}

// schedule runs one scheduling cycle for a pending pod, as the scheduler
// does, and binds it into the cluster on success; pod is updated in place.
func (c *cluster) schedule(ctx context.Context, fw *framework.Framework, pod *corev1.Pod) (Decision, error) {
	dec := Decision{Pod: pod.Namespace + "/" + pod.Name}
	state := framework.NewCycleState()
	d := fw.Schedule(ctx, state, c.snap, pod)
	dec.Results = c.results(state, d)
	switch {
	case d.Status.Code() == framework.Error && errors.Is(d.Status.Err(), allocator.ErrDeadline):
		setCondition(pod, corev1.ConditionFalse, ReasonAllocationTimeout, d.Message())
		return dec, nil
	case d.Status.Code() == framework.Error:
		return dec, fmt.Errorf("schedule pod %s: %w", dec.Pod, d.Status.Err())
	case !d.Status.IsSuccess():
		setCondition(pod, corev1.ConditionFalse, corev1.PodReasonUnschedulable, d.Message())
		return dec, nil
	}
	if err := c.bind(ctx, fw, state, pod, d.Selected); err != nil {
		return dec, err
	}
	dec.Node = d.Selected
	pod.Spec.NodeName = d.Selected
	setCondition(pod, corev1.ConditionTrue, "", "")
	return dec, nil
}

// bind reserves (as the scheduler does) and commits the binding into the
// snapshot: the pod on its node, its claims allocated and reserved.
func (c *cluster) bind(ctx context.Context, fw *framework.Framework, state *framework.CycleState, pod *corev1.Pod, node string) error {
	if st := fw.RunReserve(ctx, state, pod, node); !st.IsSuccess() {
		return fmt.Errorf("reserve pod %s/%s on %s: %s", pod.Namespace, pod.Name, node, st.Message())
	}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	snap, err := c.snap.WithPod(bound)
	if err != nil {
		return err
	}
	// Both versions' claims as the binding leaves them, applied as the
	// scheduler's claim informers would report them.
	claims, v1 := dynamicresources.BoundClaims(state), dynamicresources.BoundClaimsV1(state)
	if len(claims) > 0 || len(v1) > 0 {
		ch := dynamicresources.ClaimChanges{
			Seed: make(map[string]*resourceapi.ResourceClaim, len(claims)),
			V1:   make(map[string]*resourcev1.ResourceClaim, len(v1)),
		}
		for _, cl := range claims {
			ch.Seed[cl.Namespace+"/"+cl.Name] = cl
		}
		for _, cl := range v1 {
			ch.V1[cl.Namespace+"/"+cl.Name] = cl
		}
		snap = snap.WithExtension(dynamicresources.Name, c.objects().WithClaimChanges(c.objects().Revision(), ch))
	}
	c.snap = snap
	fw.RunPostBind(ctx, state, bound, node, "")
	return nil
}

// keepBound places a pod that already has a node there, allocating its
// claims on it if the node admits them; otherwise it warns and places the
// pod without allocating.
func (c *cluster) keepBound(ctx context.Context, fw *framework.Framework, pod *corev1.Pod, out *Output) error {
	if _, ok := c.snap.Get(pod.Spec.NodeName); !ok {
		out.Warnings = append(out.Warnings, fmt.Sprintf("pod %s/%s is bound to unknown node %s", pod.Namespace, pod.Name, pod.Spec.NodeName))
		return nil
	}
	state := framework.NewCycleState()
	d := fw.Schedule(ctx, state, c.snap, pod) // NodeName admits only its node
	switch {
	case d.Status.Code() == framework.Error:
		return fmt.Errorf("pod %s/%s on %s: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, d.Status.Err())
	case d.Status.IsSuccess():
		return c.bind(ctx, fw, state, pod, d.Selected)
	}
	out.Warnings = append(out.Warnings, fmt.Sprintf("bound pod %s/%s does not fit its node %s: %s",
		pod.Namespace, pod.Name, pod.Spec.NodeName, oneLine(d.Message())))
	snap, err := c.snap.WithPod(pod)
	if err != nil {
		return err
	}
	c.snap = snap
	return nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// results turns a diagnosis into one allocator.Result per node: the
// DynamicResources plugin's own where it judged the node, else the
// rejecting plugin's reasons with the plugin's name as the code.
func (c *cluster) results(state *framework.CycleState, d *framework.Diagnosis) []*allocator.Result {
	var out []*allocator.Result
	if d.PreFilter != nil || len(d.Nodes) == 0 {
		reasons := dynamicresources.PodReasons(state)
		if len(reasons) == 0 && d.Status != nil {
			reasons = statusReasons(d.Status)
		}
		for _, ni := range c.snap.Nodes() {
			out = append(out, &allocator.Result{Node: ni.Name(), Reasons: reasons})
		}
		return out
	}
	for _, r := range d.Nodes {
		judged := r.Feasible() || r.Rejections[0].Plugin() == dynamicresources.Name
		if res := dynamicresources.Result(state, r.Node); res != nil && judged {
			out = append(out, withV1(res, dynamicresources.ResultV1(state, r.Node)))
			continue
		}
		if v1 := dynamicresources.ResultV1(state, r.Node); v1 != nil && judged {
			out = append(out, withV1(&allocator.Result{Node: r.Node, Fits: true, Score: 100}, v1))
			continue
		}
		if r.Feasible() {
			ni, _ := c.snap.Get(r.Node)
			capacity := c.objects().NodeState(ni.Node()).Capacity()
			out = append(out, &allocator.Result{Node: r.Node, Fits: true, CapacityBefore: capacity, CapacityAfter: capacity, Score: 100})
			continue
		}
		res := &allocator.Result{Node: r.Node}
		for _, st := range r.Rejections {
			res.Reasons = append(res.Reasons, statusReasons(st)...)
		}
		out = append(out, res)
	}
	return out
}

func statusReasons(st *framework.Status) []allocator.Reason {
	return []allocator.Reason{{Code: allocator.ReasonCode(st.Plugin()), Message: st.Message()}}
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

// nodesNeeded counts template nodes for the pending pods with
// allocator.Simulation, starting from the simulated claims, with the
// framework's non-DRA filters as its node filter.
func (c *cluster) nodesNeeded(ctx context.Context, snap *allocator.Snapshot, opts Options, pending []*corev1.Pod) (*allocator.NodesNeeded, error) {
	filter, err := frameworkNodeFilter()
	if err != nil {
		return nil, err
	}
	final := *snap
	final.Claims = seedClaims(c.objects())
	final.V1Claims = c.objects().V1Claims()
	sim := allocator.NewSimulation(&final, allocator.Options{NodeFilter: filter})
	max := opts.MaxNodes
	if max <= 0 {
		max = 100
	}
	return sim.NodesNeeded(ctx, *opts.Template, pending, max)
}

// frameworkNodeFilter runs the default plugins except DynamicResources
// (the simulation allocates) on one node, alone in a snapshot.
func frameworkNodeFilter() (allocator.NodeFilter, error) {
	all, err := plugins.Default(plugins.Options{})
	if err != nil {
		return nil, err
	}
	ps := slices.DeleteFunc(all, func(p framework.Plugin) bool { return p.Name() == dynamicresources.Name })
	fw, err := framework.New(ps, framework.Options{Parallelism: 1})
	if err != nil {
		return nil, err
	}
	return func(pod *corev1.Pod, node *corev1.Node) []allocator.Reason {
		snap := framework.NewSnapshot([]*corev1.Node{simulatedNode(node)}, nil)
		d := framework.Diagnose(context.Background(), fw, snap, pod)
		if d.Status.IsSuccess() {
			return nil
		}
		var out []allocator.Reason
		if d.PreFilter != nil {
			return statusReasons(d.PreFilter)
		}
		for _, r := range d.Nodes {
			for _, st := range r.Rejections {
				out = append(out, statusReasons(st)...)
			}
		}
		if len(out) == 0 {
			out = statusReasons(d.Status)
		}
		return out
	}, nil
}
