package dra

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/allocator"
)

// The scheduler's writes for claims allocated by a driver's controller
// (seed 003): the pod's PodSchedulingContext, and deallocation requests.
// They run on the goroutine that finishes an attempt, never in the loop.

// errNoClient: the scheduler was built without an API client (unit tests
// that feed handlers by hand and have no control-plane claims).
var errNoClient = errors.New("no API client for PodSchedulingContexts and claims")

// writeContext makes the pod's PodSchedulingContext ask for n.Spec: it is
// created owned by the pod, or its spec updated, and left alone when it
// already says so (one write per decision, not per cycle). A context of
// an earlier pod with the same name is deleted first.
func (e *Extension) writeContext(ctx context.Context, pod *corev1.Pod, n *dynamicresources.Negotiation) error {
	if e.client == nil || e.src == nil {
		return errNoClient
	}
	scs := e.client.PodSchedulingContexts(pod.Namespace)
	cur := e.src.context(pod.Namespace, pod.Name)
	if cur != nil && !dynamicresources.OwnedBy(cur, pod) {
		if err := e.deleteContext(ctx, cur); err != nil {
			return err
		}
		cur = nil
	}
	if cur != nil && dynamicresources.SpecEqual(cur.Spec, n.Spec) {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, e.apiTimeout)
	defer cancel()
	var out *resourcev1alpha2.PodSchedulingContext
	var err error
	if cur == nil {
		out, err = scs.Create(actx, &resourcev1alpha2.PodSchedulingContext{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace,
				OwnerReferences: []metav1.OwnerReference{allocator.PodOwnerReference(pod)}},
			Spec: n.Spec,
		})
	} else {
		upd := cur.DeepCopy()
		upd.Spec = n.Spec
		out, err = scs.Update(actx, upd)
	}
	if err != nil {
		return fmt.Errorf("write PodSchedulingContext %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	e.src.wrote(pod.Namespace, pod.Name, out)
	e.log.Debug("wrote PodSchedulingContext", "pod", pod.Namespace+"/"+pod.Name, "selectedNode", out.Spec.SelectedNode,
		"potentialNodes", len(out.Spec.PotentialNodes))
	return nil
}

// deleteContext deletes a scheduling context (that exact object).
func (e *Extension) deleteContext(ctx context.Context, sc *resourcev1alpha2.PodSchedulingContext) error {
	if e.client == nil || e.src == nil {
		return errNoClient
	}
	actx, cancel := context.WithTimeout(ctx, e.apiTimeout)
	defer cancel()
	uid := sc.UID
	err := e.client.PodSchedulingContexts(sc.Namespace).Delete(actx, sc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete PodSchedulingContext %s/%s: %w", sc.Namespace, sc.Name, err)
	}
	e.src.wrote(sc.Namespace, sc.Name, nil)
	return nil
}

// contextDone deletes the pod's scheduling context once the pod is bound:
// the negotiation is over.
func (e *Extension) contextDone(ctx context.Context, pod *corev1.Pod) {
	if e.src == nil {
		return
	}
	sc := e.src.context(pod.Namespace, pod.Name)
	if sc == nil || !dynamicresources.OwnedBy(sc, pod) {
		return
	}
	if err := e.deleteContext(context.WithoutCancel(ctx), sc); err != nil {
		e.log.Warn("delete PodSchedulingContext of a bound pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// requestDeallocation asks the driver of the claim PostFilter chose to
// deallocate it: deallocationRequested set and the pod dropped from
// reservedFor in one status write, on the version the cycle decided on.
// A claim that changed since is left alone: its event retries the pod.
func (e *Extension) requestDeallocation(ctx context.Context, pod *corev1.Pod, d *dynamicresources.Deallocation) error {
	if e.client == nil || e.src == nil {
		return errNoClient
	}
	claim, ok := e.claim(d.Namespace, d.Name)
	if !ok || claim.ResourceVersion != d.ResourceVersion || !dynamicresources.NeedsDeallocation(claim, pod) {
		return nil
	}
	upd := claim.DeepCopy()
	dynamicresources.MarkDeallocation(upd, pod)
	actx, cancel := context.WithTimeout(ctx, e.apiTimeout)
	defer cancel()
	if _, err := e.client.ResourceClaims(d.Namespace).UpdateStatus(actx, upd); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("request deallocation of claim %s: %w", d, err)
	}
	e.log.Info("requested deallocation of a claim allocated where the pod does not fit", "pod", pod.Namespace+"/"+pod.Name, "claim", d.String())
	return nil
}
