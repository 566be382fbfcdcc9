package allocator

import (
	"context"
	"fmt"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
)

// NodeTemplate is a node as an autoscaler would add it: the node and the
// slices its drivers would publish, of either API. Its slices name the
// template node (spec.nodeName; a v1 slice's pool named after the node is
// renamed with it).
type NodeTemplate struct {
	Node     *corev1.Node
	Slices   []*resourceapi.NodeResourceSlice
	V1Slices []*resourcev1.ResourceSlice
}

// NodesNeeded is the answer to "how many nodes like this template would
// these pending pods need".
type NodesNeeded struct {
	// Nodes is the number of new nodes.
	Nodes int
	// NodeNames are the names given to them: TEMPLATE-1, TEMPLATE-2, ...
	NodeNames []string
	// Placements maps "namespace/name" of each placed pod to its new node.
	Placements map[string]string
	// Unplaceable maps pods that fit no new node to the reasons an empty
	// template node rejects them, or that max was reached.
	Unplaceable map[string][]Reason
	// Capped is true when max stopped the count: more nodes would help.
	Capped bool
}

// NodesNeeded packs the pending pods, in order, onto new copies of the
// template, without changing s: each pod goes to the new node where it fits
// most tightly (lowest remaining capacity), and a new node is added only
// when it fits none. Pods that do not fit even an empty template node are
// reported, not counted. At most max nodes are added. Existing nodes are
// not considered: these are the pods the cluster could not place.
func (s *Simulation) NodesNeeded(ctx context.Context, tmpl NodeTemplate, pods []*corev1.Pod, max int) (*NodesNeeded, error) {
	sim := s.Clone()
	out := &NodesNeeded{Placements: map[string]string{}, Unplaceable: map[string][]Reason{}}
	for _, pod := range pods {
		key := pod.Namespace + "/" + pod.Name
		p := sim.GenerateClaims(pod)
		node, reasons, err := sim.placeOnNew(ctx, p, tmpl, out, max)
		if err != nil {
			return nil, fmt.Errorf("nodes needed: %w", err)
		}
		if node == "" {
			out.Unplaceable[key] = reasons
			continue
		}
		if _, err := sim.BindPod(ctx, p, node); err != nil {
			return nil, fmt.Errorf("nodes needed: %w", err)
		}
		out.Placements[key] = node
	}
	out.Nodes = len(out.NodeNames)
	return out, nil
}

// placeOnNew returns the new node for a pod, adding one if needed, or the
// reasons it cannot be placed.
func (s *Simulation) placeOnNew(ctx context.Context, pod *corev1.Pod, tmpl NodeTemplate, out *NodesNeeded, max int) (string, []Reason, error) {
	req, v1 := s.prepare(pod)
	v1req := s.prepareV1(pod, v1)
	best, bestLeft := "", 0
	for _, n := range out.NodeNames {
		res, _, err := s.filterBoth(ctx, req, v1req, pod, n)
		if err != nil {
			return "", nil, err
		}
		if res.Fits && (best == "" || res.CapacityAfter < bestLeft) {
			best, bestLeft = n, res.CapacityAfter
		}
	}
	if best != "" {
		return best, nil, nil
	}
	if len(out.NodeNames) >= max {
		out.Capped = true
		return "", []Reason{engine.NewReason(ReasonNotEnough, "", "", nil, "",
			fmt.Sprintf("fits none of the %d new nodes and max is reached", len(out.NodeNames)))}, nil
	}
	name := s.freshName(tmpl.Node.Name, len(out.NodeNames)+1)
	node, slices, v1Slices := instantiate(tmpl, name)
	if err := s.AddNodeWith(node, slices, v1Slices); err != nil {
		return "", nil, err
	}
	res, _, err := s.filterBoth(ctx, req, v1req, pod, name)
	if err != nil {
		return "", nil, err
	}
	if !res.Fits {
		if err := s.RemoveNode(name); err != nil {
			return "", nil, err
		}
		return "", res.Reasons, nil
	}
	out.NodeNames = append(out.NodeNames, name)
	return name, nil, nil
}

// freshName returns TEMPLATE-i, or TEMPLATE-i-j if that name is taken.
func (s *Simulation) freshName(base string, i int) string {
	name := fmt.Sprintf("%s-%d", base, i)
	for j := 2; ; j++ {
		if _, taken := s.nodes.Get(name); !taken {
			return name
		}
		name = fmt.Sprintf("%s-%d-%d", base, i, j)
	}
}

// instantiate copies a template under a new node name.
func instantiate(tmpl NodeTemplate, name string) (*corev1.Node, []*resourceapi.NodeResourceSlice, []*resourcev1.ResourceSlice) {
	node := tmpl.Node.DeepCopy()
	node.Name = name
	node.UID = ""
	out := make([]*resourceapi.NodeResourceSlice, 0, len(tmpl.Slices))
	for _, sl := range tmpl.Slices {
		c := sl.DeepCopy()
		c.Name = name + "-" + sl.Name
		c.Spec.NodeName = name
		out = append(out, c)
	}
	v1 := make([]*resourcev1.ResourceSlice, 0, len(tmpl.V1Slices))
	for _, sl := range tmpl.V1Slices {
		c := sl.DeepCopy()
		c.Name = name + "-" + sl.Name
		if c.Spec.NodeName != nil && *c.Spec.NodeName == tmpl.Node.Name {
			c.Spec.NodeName = &name
		}
		if c.Spec.Pool.Name == tmpl.Node.Name {
			c.Spec.Pool.Name = name
		} else {
			c.Spec.Pool.Name = name + "-" + c.Spec.Pool.Name
		}
		for i := range c.Spec.Devices {
			if d := &c.Spec.Devices[i]; d.NodeName != nil && *d.NodeName == tmpl.Node.Name {
				d.NodeName = &name
			}
		}
		v1 = append(v1, c)
	}
	return node, out, v1
}
