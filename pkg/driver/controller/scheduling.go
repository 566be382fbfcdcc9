package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// syncContext answers one PodSchedulingContext for the pod's claims of
// this driver (seed 003): with spec.selectedNode set, it allocates the
// pending claims for that node and reserves them for the pod; then it
// records, for each claim still pending, the potential nodes (plus those
// found unsuitable before, plus the selected node when allocating for it
// failed) where the claim cannot be allocated.
func (w *worker) syncContext(ctx context.Context, ns, name string) error {
	sc, err := w.contexts.Lister().Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pod, err := w.pods.Lister().Get(ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil // orphaned: the garbage collector removes it
	case err != nil:
		return err
	case sc.DeletionTimestamp != nil || pod.DeletionTimestamp != nil || !contextOfPod(sc, pod):
		return nil
	}
	ours, pending := w.podPendingClaims(pod)
	if len(ours) == 0 {
		return nil
	}
	for _, ca := range pending {
		if ca.ClassParameters, ca.ClaimParameters, err = w.parameters(ctx, ca.Claim, ca.Class); err != nil {
			return err
		}
	}
	var allocErrs []error
	failed := map[string]bool{}
	if node := sc.Spec.SelectedNode; node != "" {
		stillPending := pending[:0:0]
		for _, ca := range pending {
			if err := w.allocate(ctx, ca.Claim, ca.Class, ca.ClassParameters, ca.ClaimParameters, node, pod); err != nil {
				allocErrs = append(allocErrs, err)
				failed[ca.PodClaimName] = true
				stillPending = append(stillPending, ca)
			}
		}
		pending = stillPending
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := w.answer(ctx, sc, pod, ours, pending, failed); err != nil {
		allocErrs = append(allocErrs, err)
	}
	return errors.Join(allocErrs...)
}

// podPendingClaims returns the pod's spec.resourceClaims entries whose
// claims are of our classes and wait for first consumer (ours), and of
// those the claims that are still to be allocated (pending).
func (w *worker) podPendingClaims(pod *corev1.Pod) (ours map[string]bool, pending []*ClaimAllocation) {
	ours = map[string]bool{}
	for _, pc := range podClaims(pod) {
		claim, err := w.claims.Lister().Get(pod.Namespace, pc.claimName)
		if err != nil || (pc.generated && !ownedBy(claim, pod.UID)) {
			continue // not created yet, or not the pod's
		}
		class := w.class(claim.Spec.ResourceClassName)
		if !w.names.classIsOurs(class) || claim.Spec.AllocationMode == resourcev1alpha2.AllocationModeImmediate {
			continue
		}
		ours[pc.entry] = true
		if w.names.pendingForPod(claim, class) {
			pending = append(pending, &ClaimAllocation{PodClaimName: pc.entry, Claim: claim.DeepCopy(), Class: class.DeepCopy()})
		}
	}
	return ours, pending
}

// answer computes the unsuitable nodes of the pending claims and writes
// the entries of ours into the context's status when they changed.
func (w *worker) answer(ctx context.Context, sc *resourcev1alpha2.PodSchedulingContext, pod *corev1.Pod,
	ours map[string]bool, pending []*ClaimAllocation, failed map[string]bool) error {
	failedNode := ""
	if len(failed) > 0 {
		failedNode = sc.Spec.SelectedNode
	}
	entries := map[string]bool{}
	for _, ca := range pending {
		entries[ca.PodClaimName] = true
	}
	nodes := nodesToCheck(failedNode, sc.Spec.PotentialNodes, priorUnsuitable(sc.Status.ResourceClaims, entries))
	if len(pending) > 0 && len(nodes) > 0 {
		dctx, cancel := w.driverContext(ctx)
		err := w.driver.UnsuitableNodes(dctx, pod.DeepCopy(), pending, nodes)
		cancel()
		if err != nil {
			return fmt.Errorf("find unsuitable nodes for pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	var answers []resourcev1alpha2.ResourceClaimSchedulingStatus
	for _, ca := range pending {
		fn := ""
		if failed[ca.PodClaimName] {
			fn = failedNode
		}
		answers = append(answers, answer(ca.PodClaimName, ca.UnsuitableNodes, nodes, fn))
	}
	merged := mergeStatus(sc.Status.ResourceClaims, ours, answers)
	if equality.Semantic.DeepEqual(merged, sc.Status.ResourceClaims) {
		return nil
	}
	upd := sc.DeepCopy()
	upd.Status.ResourceClaims = merged
	actx, cancel := w.apiContext(ctx)
	defer cancel()
	if _, err := w.cfg.Client.PodSchedulingContexts(sc.Namespace).UpdateStatus(actx, upd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update status of podschedulingcontext %s/%s: %w", sc.Namespace, sc.Name, err)
	}
	return nil
}
