package dynamicresources

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
)

// Negotiation is what a scheduling cycle decided for a pod whose
// WaitForFirstConsumer control-plane claims are not allocated yet: the
// spec of the pod's PodSchedulingContext that the drivers should see, and
// why the pod waits. The scheduler writes the spec (only when it differs
// from the context it knows) and parks the pod with Status.
type Negotiation struct {
	// Current is the pod's context as the cycle saw it; nil when it has
	// none.
	Current *resourceapi.PodSchedulingContext
	// Spec: PotentialNodes are the feasible nodes (at most
	// PodSchedulingNodeListMaxSize, the best scored, sorted by name);
	// SelectedNode is the node the drivers are to allocate for, or empty
	// while the scheduler waits for their answers.
	Spec resourceapi.PodSchedulingContextSpec
	// Status is a Wait whose message is ReasonWaitingForInformation or
	// ReasonWaitingForAllocation, with the pending claims as detail.
	Status *framework.Status
}

// Negotiate returns the negotiation for the pod of a successful cycle, or
// nil when the pod has no pending control-plane claim (it can be reserved
// and bound). d must be the cycle's diagnosis with a selected node.
//
// A node already selected stays selected while it is feasible: drivers
// must not see it flip while they allocate. Otherwise the cycle's best
// node is selected when exactly one claim is pending (guessing wrong costs
// one round trip) or when every pending claim's driver has answered in
// the context; with several claims and missing answers nothing is
// selected, so that no claim gets allocated where another cannot be.
func Negotiate(state *framework.CycleState, d *framework.Diagnosis) *Negotiation {
	s, ok := readState(state)
	if !ok {
		return nil
	}
	pending := s.pendingClaims()
	if len(pending) == 0 || d == nil || d.Selected == "" {
		return nil
	}
	n := &Negotiation{Current: s.context}
	n.Spec.PotentialNodes = potentialNodes(d)
	cur := ""
	if s.context != nil {
		cur = s.context.Spec.SelectedNode
	}
	var names []string
	for _, c := range pending {
		names = append(names, c.key)
	}
	switch {
	case cur != "" && slices.Contains(n.Spec.PotentialNodes, cur):
		n.Spec.SelectedNode = cur
	case len(pending) == 1 || s.answered(pending):
		n.Spec.SelectedNode = d.Selected
	}
	if n.Spec.SelectedNode == "" {
		n.Status = framework.NewStatus(framework.Wait, ReasonWaitingForInformation).
			WithDetail("claims %s", strings.Join(names, ", "))
	} else {
		n.Status = framework.NewStatus(framework.Wait, ReasonWaitingForAllocation).
			WithDetail("claims %s on node %s", strings.Join(names, ", "), n.Spec.SelectedNode)
	}
	n.Status = n.Status.WithPlugin(Name)
	return n
}

// potentialNodes returns the feasible nodes, the best scored first up to
// the API's limit, sorted by name so that an unchanged set compares
// equal.
func potentialNodes(d *framework.Diagnosis) []string {
	feasible := d.Feasible()
	slices.SortStableFunc(feasible, func(a, b *framework.NodeResult) int {
		switch {
		case a.Node == d.Selected:
			return -1
		case b.Node == d.Selected:
			return 1
		case a.Score != b.Score:
			return int(b.Score - a.Score)
		}
		return strings.Compare(a.Node, b.Node)
	})
	out := make([]string, 0, min(len(feasible), resourceapi.PodSchedulingNodeListMaxSize))
	for _, r := range feasible[:min(len(feasible), resourceapi.PodSchedulingNodeListMaxSize)] {
		out = append(out, r.Node)
	}
	slices.Sort(out)
	return out
}

// answered reports whether the context has an entry for every pending
// claim: each driver has said where it cannot allocate.
func (s *stateData) answered(pending []cpClaim) bool {
	if s.context == nil {
		return false
	}
	for _, c := range pending {
		if !slices.ContainsFunc(s.context.Status.ResourceClaims, func(rc resourceapi.ResourceClaimSchedulingStatus) bool {
			return rc.Name == c.entry
		}) {
			return false
		}
	}
	return true
}

// SpecEqual reports whether two scheduling context specs ask the drivers
// the same: the same selected node and the same set of potential nodes.
func SpecEqual(a, b resourceapi.PodSchedulingContextSpec) bool {
	if a.SelectedNode != b.SelectedNode || len(a.PotentialNodes) != len(b.PotentialNodes) {
		return false
	}
	x, y := slices.Clone(a.PotentialNodes), slices.Clone(b.PotentialNodes)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Deallocation is a claim whose deallocation PostFilter requested: the
// scheduler sets status.deallocationRequested and removes the pod from
// status.reservedFor, guarded by ResourceVersion.
type Deallocation struct {
	Namespace, Name, ResourceVersion string
}

// PostFilter implements framework.PostFilterPlugin: when no node fits and
// one of the pod's WaitForFirstConsumer control-plane claims is allocated,
// unused or reserved only for this pod, and not available on some node,
// the claim may be what keeps the pod off the nodes where it would fit
// (seed 003's recovery). One such claim, picked at random, is recorded
// for deallocation (see Deallocations) and PostFilter succeeds; otherwise
// it is Unschedulable.
func (p *DynamicResources) PostFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, d *framework.Diagnosis) *framework.Status {
	s, ok := readState(state)
	if !ok || len(s.cp) == 0 {
		return framework.NewStatus(framework.Unschedulable)
	}
	var candidates []cpClaim
	for _, c := range s.cp {
		st := c.claim.Status
		if st.Allocation == nil || st.DeallocationRequested || c.claim.DeletionTimestamp != nil ||
			c.claim.Spec.AllocationMode == resourceapi.AllocationModeImmediate || !onlyReservedFor(c.claim, pod) ||
			!excludesSomeNode(st.Allocation.AvailableOnNodes, d) {
			continue
		}
		candidates = append(candidates, c)
	}
	if len(candidates) == 0 {
		return framework.NewStatus(framework.Unschedulable)
	}
	c := candidates[rand.IntN(len(candidates))]
	s.dealloc = &Deallocation{Namespace: c.claim.Namespace, Name: c.claim.Name, ResourceVersion: c.claim.ResourceVersion}
	return nil
}

// onlyReservedFor: nobody, or only the pod, reserves the claim.
func onlyReservedFor(c *resourceapi.ResourceClaim, pod *corev1.Pod) bool {
	return len(c.Status.ReservedFor) == 0 || (len(c.Status.ReservedFor) == 1 && allocator.ReservedFor(c, pod))
}

// excludesSomeNode reports whether sel leaves out a node of the cycle.
func excludesSomeNode(sel *corev1.NodeSelector, d *framework.Diagnosis) bool {
	if sel == nil {
		return false
	}
	for _, r := range d.Nodes {
		if n := r.NodeInfo(); n != nil && !sel.Matches(n.Name(), n.Node().Labels) {
			return true
		}
	}
	return false
}

// RequestedDeallocation returns the claim PostFilter chose to deallocate
// in this cycle, or nil.
func RequestedDeallocation(state *framework.CycleState) *Deallocation {
	s, ok := readState(state)
	if !ok {
		return nil
	}
	return s.dealloc
}

// NeedsDeallocation reports whether the claim's deallocation can be
// requested for the pod now: it is allocated, not already being
// deallocated, and reserved by nobody but the pod. Apply with
// MarkDeallocation.
func NeedsDeallocation(c *resourceapi.ResourceClaim, pod *corev1.Pod) bool {
	return c.Status.Allocation != nil && !c.Status.DeallocationRequested && onlyReservedFor(c, pod)
}

// MarkDeallocation sets deallocationRequested and drops the pod from
// reservedFor, in place (one status write, as validation requires).
func MarkDeallocation(c *resourceapi.ResourceClaim, pod *corev1.Pod) {
	c.Status.DeallocationRequested = true
	c.Status.ReservedFor = slices.DeleteFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
		return allocator.IsPod(r, pod)
	})
}

// ContextOf returns the pod's own scheduling context as the cycle saw it,
// or nil.
func ContextOf(state *framework.CycleState) *resourceapi.PodSchedulingContext {
	s, ok := readState(state)
	if !ok {
		return nil
	}
	return s.context
}

func (d *Deallocation) String() string { return fmt.Sprintf("%s/%s", d.Namespace, d.Name) }
