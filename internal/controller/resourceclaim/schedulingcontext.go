package resourceclaim

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// Pods given a node by hand whose control-plane claims are not allocated
// get a PodSchedulingContext with only spec.selectedNode (seed 003,
// "scheduled pods with unallocated or unreserved claims"): the node is
// permanent, so the drivers only allocate for it. The scheduler reserves
// the allocated claims for the pod, as it does for structured claims.

// needsContext reports whether the bound pod has a pending control-plane
// claim, as the caches show it.
func (c *Controller) needsContext(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || podTerminal(pod) {
		return false
	}
	for _, name := range pod.ResourceClaimNames() {
		claim, err := c.claims.Lister().Get(pod.Namespace, name)
		if err != nil {
			continue
		}
		if PendingControlPlaneClaim(claim, c.class(claim.Spec.ResourceClassName)) {
			return true
		}
	}
	return false
}

// syncContext makes sure a bound pod with pending control-plane claims
// has a PodSchedulingContext, owned by it, whose spec is only
// selectedNode = the pod's node. A context left by an earlier pod of the
// same name is deleted first.
func (c *Controller) syncContext(ctx context.Context, pod *corev1.Pod) error {
	if !c.needsContext(pod) {
		return nil
	}
	scs := c.c.PodSchedulingContexts(pod.Namespace)
	want := resourcev1alpha2.PodSchedulingContextSpec{SelectedNode: pod.Spec.NodeName}
	cur, err := c.contexts.Lister().Get(pod.Namespace, pod.Name)
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return err
	}
	actx, cancel := c.apiContext(ctx)
	defer cancel()
	if cur != nil && !ownedBy(cur, pod) {
		uid := cur.UID
		err := scs.Delete(actx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete stale PodSchedulingContext %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return fmt.Errorf("PodSchedulingContext %s/%s belonged to an earlier pod; deleted, retrying", pod.Namespace, pod.Name)
	}
	switch {
	case cur == nil:
		_, err = scs.Create(actx, &resourcev1alpha2.PodSchedulingContext{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace,
				OwnerReferences: []metav1.OwnerReference{allocator.PodOwnerReference(pod)}},
			Spec: want,
		})
	case cur.Spec.SelectedNode == want.SelectedNode && len(cur.Spec.PotentialNodes) == 0:
		return nil
	default:
		upd := cur.DeepCopy()
		upd.Spec = want
		_, err = scs.Update(actx, upd)
	}
	if err != nil {
		return fmt.Errorf("write PodSchedulingContext %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.log.Info("asked drivers to allocate for a pod given a node by hand", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	return nil
}

func ownedBy(sc *resourcev1alpha2.PodSchedulingContext, pod *corev1.Pod) bool {
	return slices.ContainsFunc(sc.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "Pod" && r.UID == pod.UID })
}
