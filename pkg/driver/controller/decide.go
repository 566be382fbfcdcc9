package controller

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// names identifies one controller: its driver, its controller name and
// its finalizer.
type names struct {
	driver, controller, finalizer string
}

func namesOf(cfg Config) names {
	return names{driver: cfg.DriverName, controller: cfg.ControllerName, finalizer: Finalizer(cfg.ControllerName)}
}

// classIsOurs reports whether claims of class are allocated by this
// controller.
func (n names) classIsOurs(class *resourcev1alpha2.ResourceClass) bool {
	return class != nil && class.DriverName == n.driver && class.ControllerName == n.controller
}

// allocatedByUs reports whether the claim's status says this controller
// allocated it.
func (n names) allocatedByUs(claim *resourcev1alpha2.ResourceClaim) bool {
	return claim.Status.DriverName == n.driver && claim.Status.ControllerName == n.controller
}

func (n names) hasFinalizer(claim *resourcev1alpha2.ResourceClaim) bool {
	return slices.Contains(claim.Finalizers, n.finalizer)
}

// action is what a claim needs from the controller.
type action int

const (
	actionNone action = iota
	// actionAllocate: an Immediate claim of our class, unallocated.
	actionAllocate
	// actionDeallocate: deletion or deallocation was requested, nobody
	// reserves the claim, and we may hold resources for it.
	actionDeallocate
)

// claimAction decides what a claim needs. class is the claim's class,
// nil when it does not exist. A claim being deleted or deallocated stays
// ours when we allocated it or hold its finalizer, even when its class
// is gone or changed; WaitForFirstConsumer claims are allocated through
// scheduling contexts, never here; nothing is deallocated while
// reservedFor is not empty.
func (n names) claimAction(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) action {
	st := &claim.Status
	if claim.DeletionTimestamp != nil || st.DeallocationRequested {
		mayHold := n.hasFinalizer(claim) || (st.Allocation != nil && n.allocatedByUs(claim))
		if mayHold && len(st.ReservedFor) == 0 {
			return actionDeallocate
		}
		return actionNone
	}
	if st.Allocation == nil && n.classIsOurs(class) && claim.Spec.AllocationMode == resourcev1alpha2.AllocationModeImmediate {
		return actionAllocate
	}
	return actionNone
}

// pendingForPod reports whether a claim of our class waits for a node to
// be allocated for: WaitForFirstConsumer, unallocated, not being deleted.
func (n names) pendingForPod(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	return n.classIsOurs(class) && claim.Spec.AllocationMode != resourcev1alpha2.AllocationModeImmediate &&
		claim.Status.Allocation == nil && claim.DeletionTimestamp == nil && !claim.Status.DeallocationRequested
}

// podClaim is one entry of a pod's spec.resourceClaims with the name of
// its ResourceClaim.
type podClaim struct {
	entry     string // pod.spec.resourceClaims[].name
	claimName string
	generated bool // from a template: the pod must own the claim
}

// podClaims lists the pod's claims whose ResourceClaim name is known:
// named in the spec, or generated from a template and recorded in the
// pod's status.
func podClaims(pod *corev1.Pod) []podClaim {
	var out []podClaim
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			out = append(out, podClaim{entry: rc.Name, claimName: *rc.ResourceClaimName})
			continue
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == rc.Name && st.ResourceClaimName != nil {
				out = append(out, podClaim{entry: rc.Name, claimName: *st.ResourceClaimName, generated: true})
			}
		}
	}
	return out
}

// ownedBy reports whether obj's controlling owner is the pod with uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == uid
}

// contextOfPod reports whether a scheduling context belongs to the pod:
// when the context names a pod owner, it must be this pod (a context left
// by a deleted pod of the same name is an orphan to ignore).
func contextOfPod(sc *resourcev1alpha2.PodSchedulingContext, pod *corev1.Pod) bool {
	for _, ref := range sc.OwnerReferences {
		if ref.Kind == "Pod" && ref.APIVersion == "v1" && ref.UID != pod.UID {
			return false
		}
	}
	return true
}

// podReference is the reservedFor entry of a pod.
func podReference(pod *corev1.Pod) resourcev1alpha2.ResourceClaimConsumerReference {
	return resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}

// nodesToCheck is the node list UnsuitableNodes gets: the selected node
// when allocating for it failed, the potential nodes, and the nodes found
// unsuitable before (the scheduler does not list them again, but they may
// still be unsuitable), without duplicates and at most
// PodSchedulingNodeListMaxSize of them, in that order of priority.
func nodesToCheck(failedNode string, potential, prior []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] && len(out) < resourcev1alpha2.PodSchedulingNodeListMaxSize {
			seen[n] = true
			out = append(out, n)
		}
	}
	add(failedNode)
	for _, n := range potential {
		add(n)
	}
	for _, n := range prior {
		add(n)
	}
	return out
}

// answer turns a driver's unsuitable nodes into a status entry: only
// nodes that were asked about, no duplicates, at most
// PodSchedulingNodeListMaxSize, and failedNode always included (first)
// when set.
func answer(entry string, unsuitable, asked []string, failedNode string) resourcev1alpha2.ResourceClaimSchedulingStatus {
	askedSet := make(map[string]bool, len(asked))
	for _, n := range asked {
		askedSet[n] = true
	}
	var nodes []string
	seen := map[string]bool{}
	for _, n := range append([]string{failedNode}, unsuitable...) {
		if n == "" || seen[n] || !askedSet[n] || len(nodes) == resourcev1alpha2.PodSchedulingNodeListMaxSize {
			continue
		}
		seen[n] = true
		nodes = append(nodes, n)
	}
	return resourcev1alpha2.ResourceClaimSchedulingStatus{Name: entry, UnsuitableNodes: nodes}
}

// mergeStatus replaces the entries of ours in a scheduling context's
// status.resourceClaims by answers, keeping every other driver's entries
// in place: entries of ours without an answer (claims allocated since)
// are dropped, answers without an entry are appended in their order.
func mergeStatus(current []resourcev1alpha2.ResourceClaimSchedulingStatus, ours map[string]bool,
	answers []resourcev1alpha2.ResourceClaimSchedulingStatus) []resourcev1alpha2.ResourceClaimSchedulingStatus {
	byName := make(map[string]resourcev1alpha2.ResourceClaimSchedulingStatus, len(answers))
	for _, a := range answers {
		byName[a.Name] = a
	}
	var out []resourcev1alpha2.ResourceClaimSchedulingStatus
	done := map[string]bool{}
	for _, e := range current {
		if !ours[e.Name] {
			out = append(out, e)
			continue
		}
		if a, ok := byName[e.Name]; ok && !done[e.Name] {
			out = append(out, a)
			done[e.Name] = true
		}
	}
	for _, a := range answers {
		if !done[a.Name] {
			out = append(out, a)
			done[a.Name] = true
		}
	}
	return out
}

// priorUnsuitable collects the unsuitable nodes already recorded for
// entries.
func priorUnsuitable(current []resourcev1alpha2.ResourceClaimSchedulingStatus, entries map[string]bool) []string {
	var out []string
	for _, e := range current {
		if entries[e.Name] {
			out = append(out, e.UnsuitableNodes...)
		}
	}
	return out
}

// completeAllocation checks a driver's allocation result and fills in the
// driver name of its handles.
func completeAllocation(a *resourcev1alpha2.AllocationResult, driverName string) (*resourcev1alpha2.AllocationResult, error) {
	if a == nil {
		return nil, fmt.Errorf("driver returned no allocation and no error")
	}
	a = a.DeepCopy()
	if len(a.ResourceHandles) == 0 {
		a.ResourceHandles = []resourcev1alpha2.ResourceHandle{{DriverName: driverName}}
	}
	if n := len(a.ResourceHandles); n > resourcev1alpha2.AllocationResultResourceHandlesMaxSize {
		return nil, fmt.Errorf("allocation.resourceHandles: %d handles, more than the %d allowed", n, resourcev1alpha2.AllocationResultResourceHandlesMaxSize)
	}
	for i := range a.ResourceHandles {
		h := &a.ResourceHandles[i]
		if h.DriverName == "" {
			h.DriverName = driverName
		}
		if n := len(h.Data); n > resourcev1alpha2.ResourceHandleDataMaxSize {
			return nil, fmt.Errorf("allocation.resourceHandles[%d].data: %d bytes, more than the %d allowed", i, n, resourcev1alpha2.ResourceHandleDataMaxSize)
		}
		if h.StructuredData != nil {
			return nil, fmt.Errorf("allocation.resourceHandles[%d].structuredData: must not be set by a control-plane controller; use data", i)
		}
	}
	return a, nil
}
