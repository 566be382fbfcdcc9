package dynamicresources

import (
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of claims allocated by a driver's controller (seed 003). The two
// waiting messages are the seed's, so that operators recognise them.
const (
	// ReasonWaitingForInformation: the scheduler asked the drivers of
	// several pending claims where they can allocate and waits until each
	// has answered before it selects a node.
	ReasonWaitingForInformation = "waiting for resource driver to provide information"
	// ReasonWaitingForAllocation: a node was selected (or the claim uses
	// Immediate allocation) and the driver has not allocated yet.
	ReasonWaitingForAllocation = "waiting for resource driver to allocate resource"
	// ReasonWaitingDeallocationFormat: the claim (%s) has
	// deallocationRequested set; no consumer may reserve it until its
	// driver deallocates it.
	ReasonWaitingDeallocationFormat = "waiting for resource driver to deallocate claim %s"
	// ErrReasonAllocatedElsewhereFormat: the claim (%s) is allocated and
	// its availableOnNodes excludes the node.
	ErrReasonAllocatedElsewhereFormat = "claim %s is allocated for other nodes"
	// ErrReasonUnsuitableFormat: the claim's (%s) driver listed the node in
	// the pod's PodSchedulingContext as unsuitable.
	ErrReasonUnsuitableFormat = "claim %s cannot be allocated on the node (its resource driver said so)"
	// ErrReasonSuitableNodesFormat: the node does not match the
	// suitableNodes of the claim's (%s) class (%s).
	ErrReasonSuitableNodesFormat = "claim %s: node does not match suitableNodes of class %s"
)

// cpClaim is one of the pod's claims whose class names a driver's
// controller (or that such a controller allocated).
type cpClaim struct {
	entry string // the pod's spec.resourceClaims name
	key   string // namespace/name
	claim *resourceapi.ResourceClaim
	class *resourceapi.ResourceClass // nil when deleted after allocation
}

// pending reports whether the driver still has to allocate the claim for
// a node the scheduler selects (WaitForFirstConsumer, not allocated).
func (c cpClaim) pending() bool {
	return c.claim.Status.Allocation == nil && c.claim.Spec.AllocationMode != resourceapi.AllocationModeImmediate
}

// controlPlane reports whether a claim is allocated by a driver's
// controller rather than by the scheduler: its status names a controller,
// or it is not allocated with structured handles and its class names one.
func (o *Objects) controlPlane(c *resourceapi.ResourceClaim) (*resourceapi.ResourceClass, bool) {
	class := o.catalog.Class(c.Spec.ResourceClassName)
	if c.Status.ControllerName != "" {
		return class, true
	}
	if c.Status.Allocation != nil && len(allocator.AllocatedNodes(c)) > 0 {
		return class, false
	}
	return class, class != nil && class.ControllerName != ""
}

// checkControlPlane judges the pod's control-plane claims for every node
// at once: being deleted or in use is Unschedulable; an Immediate claim
// not allocated yet, or a claim whose deallocation was requested, is a
// Wait.
func (s *stateData) checkControlPlane(pod *corev1.Pod) *framework.Status {
	var waits, busy []string
	add := func(list *[]string, code allocator.ReasonCode, key, msg string) {
		*list = append(*list, msg)
		s.reasons = append(s.reasons, allocator.Reason{Code: code, Claim: key, Message: msg})
	}
	for _, c := range s.cp {
		cl := c.claim
		st := cl.Status
		switch {
		case cl.DeletionTimestamp != nil:
			add(&busy, allocator.ReasonClaimDeleted, c.key, fmt.Sprintf("claim %s is being deleted", c.key))
		case st.DeallocationRequested:
			add(&waits, allocator.ReasonNotStructured, c.key, fmt.Sprintf(ReasonWaitingDeallocationFormat, c.key))
		case st.Allocation == nil && !c.pending():
			add(&waits, allocator.ReasonNotStructured, c.key,
				fmt.Sprintf("%s (claim %s, allocation mode Immediate)", ReasonWaitingForAllocation, c.key))
		case st.Allocation == nil || allocator.ReservedFor(cl, pod):
		case !st.Allocation.Shareable && len(st.ReservedFor) > 0:
			add(&busy, allocator.ReasonClaimInUse, c.key, fmt.Sprintf("claim %s is not shareable and in use by %s", c.key, consumers(cl)))
		case len(st.ReservedFor) >= resourceapi.ResourceClaimReservedForMaxSize:
			add(&busy, allocator.ReasonClaimReservedForFull, c.key,
				fmt.Sprintf("claim %s already has %d consumers, the maximum", c.key, len(st.ReservedFor)))
		}
	}
	switch {
	case len(waits) > 0:
		return framework.NewStatus(framework.Wait, waits...)
	case len(busy) > 0:
		return framework.NewStatus(framework.Unschedulable, busy...)
	}
	return nil
}

func consumers(c *resourceapi.ResourceClaim) string {
	names := make([]string, 0, len(c.Status.ReservedFor))
	for _, r := range c.Status.ReservedFor {
		names = append(names, r.Resource+"/"+r.Name)
	}
	return strings.Join(names, ", ")
}

// ownContext returns the pod's PodSchedulingContext from the snapshot, if
// it is owned by this pod (one left behind by an earlier pod of the same
// name does not count).
func ownContext(objs *Objects, pod *corev1.Pod) *resourceapi.PodSchedulingContext {
	sc, ok := objs.Context(pod.Namespace, pod.Name)
	if !ok || !OwnedBy(sc, pod) {
		return nil
	}
	return sc
}

// OwnedBy reports whether the pod is an owner of the scheduling context.
func OwnedBy(sc *resourceapi.PodSchedulingContext, pod *corev1.Pod) bool {
	return slices.ContainsFunc(sc.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Kind == "Pod" && r.UID == pod.UID
	})
}

// filterControlPlane rejects a node on which an allocated claim is not
// available, which a pending claim's class does not suit, or which a
// pending claim's driver reported as unsuitable.
func (s *stateData) filterControlPlane(node *corev1.Node) *framework.Status {
	for _, c := range s.cp {
		if a := c.claim.Status.Allocation; a != nil {
			if !a.AvailableOnNodes.Matches(node.Name, node.Labels) {
				return framework.NewStatus(framework.Unschedulable, fmt.Sprintf(ErrReasonAllocatedElsewhereFormat, c.key))
			}
			continue
		}
		if c.class != nil && !c.class.SuitableNodes.Matches(node.Name, node.Labels) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable,
				fmt.Sprintf(ErrReasonSuitableNodesFormat, c.key, c.class.Name))
		}
		if s.unsuitable(c.entry, node.Name) {
			return framework.NewStatus(framework.Unschedulable, fmt.Sprintf(ErrReasonUnsuitableFormat, c.key))
		}
	}
	return nil
}

// unsuitable reports whether the driver of the pod's claim entry listed
// node as unsuitable in the pod's scheduling context.
func (s *stateData) unsuitable(entry, node string) bool {
	if s.context == nil {
		return false
	}
	for _, rc := range s.context.Status.ResourceClaims {
		if rc.Name == entry && slices.Contains(rc.UnsuitableNodes, node) {
			return true
		}
	}
	return false
}

// pendingClaims returns the pod's claims that wait for a node to be
// selected and allocated by their driver.
func (s *stateData) pendingClaims() []cpClaim {
	var out []cpClaim
	for _, c := range s.cp {
		if c.pending() {
			out = append(out, c)
		}
	}
	return out
}
