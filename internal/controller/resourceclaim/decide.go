package resourceclaim

import (
	"slices"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// Event reasons.
const (
	ReasonFailedCreate = "FailedResourceClaimCreation"
)

// podTerminal reports whether the pod's containers will not run again.
func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// ClaimsToCreate returns the template entries of the pod's
// spec.resourceClaims that have no claim recorded in its status. A pod that
// is terminal or being deleted needs none.
func ClaimsToCreate(pod *corev1.Pod) []corev1.PodResourceClaim {
	if pod.DeletionTimestamp != nil || podTerminal(pod) {
		return nil
	}
	var out []corev1.PodResourceClaim
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil {
			continue
		}
		if recordedClaim(pod, rc.Name) {
			continue
		}
		out = append(out, rc)
	}
	return out
}

func recordedClaim(pod *corev1.Pod, entry string) bool {
	return slices.ContainsFunc(pod.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool {
		return s.Name == entry
	})
}

// newClaimFromTemplate is the claim the controller creates for the pod's
// entry: allocator.NewClaimFromTemplate, named by GeneratedClaimName so
// that a retried create finds it.
func newClaimFromTemplate(pod *corev1.Pod, entry string, tmpl *resourcev1alpha2.ResourceClaimTemplate) *resourcev1alpha2.ResourceClaim {
	return allocator.NewClaimFromTemplate(pod, entry, tmpl, allocator.GeneratedClaimName(pod, entry))
}

// ReservationObsolete reports whether a reservedFor entry may be removed,
// given the consumer pod as last seen (nil: it does not exist). Entries of
// other resources are kept. A terminal pod keeps its reservation until the
// node agent has unprepared its claims.
func ReservationObsolete(ref resourcev1alpha2.ResourceClaimConsumerReference, pod *corev1.Pod) bool {
	if ref.APIGroup != "" || ref.Resource != "pods" {
		return false
	}
	if pod == nil || pod.UID != ref.UID {
		return true
	}
	return podTerminal(pod) && podConditionTrue(pod, corev1.PodResourceClaimsUnprepared)
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Structured reports whether the claim is this controller's to deallocate:
// it carries the delete-protection finalizer and neither it nor its class
// (nil when unknown) names a control-plane controller.
func Structured(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	if claim.Status.ControllerName != "" || (class != nil && class.ControllerName != "") {
		return false
	}
	return slices.Contains(claim.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer)
}

// ShouldDeallocate reports whether the structured claim's allocation is to
// be cleared: it is allocated, reserved by nobody, and either waits for
// its first consumer (Immediate claims stay allocated) or is being deleted.
func ShouldDeallocate(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	if !Structured(claim, class) || claim.Status.Allocation == nil || len(claim.Status.ReservedFor) > 0 {
		return false
	}
	return claim.DeletionTimestamp != nil || claim.Spec.AllocationMode != resourcev1alpha2.AllocationModeImmediate
}

// ShouldRemoveFinalizer reports whether the delete-protection finalizer
// protects nothing any more: the structured claim is not allocated.
func ShouldRemoveFinalizer(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	return Structured(claim, class) && claim.Status.Allocation == nil && len(claim.Status.ReservedFor) == 0
}

// ControlPlane reports whether a driver's controller allocates the claim
// (seed 003): its status names a controller, or its class (nil when
// unknown) does.
func ControlPlane(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	return claim.Status.ControllerName != "" || (class != nil && class.ControllerName != "")
}

// ShouldRequestDeallocation reports whether, once its last consumer is
// gone, the control-plane claim's driver is asked to deallocate it: it is
// allocated, waits for its first consumer (Immediate claims stay
// allocated), nobody reserves it and deallocation is not requested yet.
// The transition from used to unused is the trigger: a driver need not
// reserve a claim together with allocating it.
func ShouldRequestDeallocation(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	return ControlPlane(claim, class) && claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 0 &&
		!claim.Status.DeallocationRequested && claim.Spec.AllocationMode != resourcev1alpha2.AllocationModeImmediate
}

// PendingControlPlaneClaim reports whether a claim waits for its driver's
// controller to allocate it for a selected node: control-plane,
// WaitForFirstConsumer, not allocated and not being deleted.
func PendingControlPlaneClaim(claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) bool {
	return ControlPlane(claim, class) && claim.Status.Allocation == nil && claim.DeletionTimestamp == nil &&
		claim.Spec.AllocationMode != resourcev1alpha2.AllocationModeImmediate
}
