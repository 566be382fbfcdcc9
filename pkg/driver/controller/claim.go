package controller

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// class returns a class from the cache, nil when it does not exist (or
// the cache cannot answer, which an informer's indexer never fails at).
func (c *Controller) class(name string) *resourcev1alpha2.ResourceClass {
	class, err := c.classes.Lister().Get("", name)
	if err != nil {
		return nil
	}
	return class
}

// syncClaim allocates an Immediate claim of our classes, or deallocates a
// claim whose deletion or deallocation was requested.
func (w *worker) syncClaim(ctx context.Context, ns, name string) error {
	claim, err := w.claims.Lister().Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	class := w.class(claim.Spec.ResourceClassName)
	switch w.names.claimAction(claim, class) {
	case actionAllocate:
		return w.allocateImmediate(ctx, claim, class)
	case actionDeallocate:
		return w.deallocate(ctx, claim)
	}
	return nil
}

// parameters resolves the class's and the claim's parameters through the
// driver. A failure is recorded as an event on the claim.
func (w *worker) parameters(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) (classParams, claimParams any, err error) {
	dctx, cancel := w.driverContext(ctx)
	defer cancel()
	classParams, err = w.driver.GetClassParameters(dctx, class.DeepCopy())
	if err != nil {
		err = fmt.Errorf("get parameters of class %s: %w", class.Name, err)
	} else if claimParams, err = w.driver.GetClaimParameters(dctx, claim.DeepCopy(), class.DeepCopy(), classParams); err != nil {
		err = fmt.Errorf("get parameters of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			w.events.Eventf(claim, corev1.EventTypeWarning, ReasonParametersUnavailable, "%v", err)
		}
		return nil, nil, err
	}
	return classParams, claimParams, nil
}

func (w *worker) allocateImmediate(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass) error {
	classParams, claimParams, err := w.parameters(ctx, claim, class)
	if err != nil {
		return err
	}
	return w.allocate(ctx, claim, class, classParams, claimParams, "", nil)
}

// allocate allocates one claim under its lock: on a fresh read of the
// claim that still needs it, add the finalizer, call Driver.Allocate, and
// store the allocation (and, for a pod, the reservation) in one status
// write. node is "" for Immediate claims; pod is nil for them.
func (w *worker) allocate(ctx context.Context, cached *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass,
	classParams, claimParams any, node string, pod *corev1.Pod) error {
	unlock, err := w.locks.Lock(ctx, cached.UID)
	if err != nil {
		return fmt.Errorf("wait for other work on claim %s: %w", cached.UID, err)
	}
	defer unlock()
	claim, err := w.getClaim(ctx, cached.Namespace, cached.Name)
	if err != nil || claim == nil || claim.UID != cached.UID {
		return err // gone or replaced: nothing to allocate
	}
	if claim.Status.Allocation != nil || claim.DeletionTimestamp != nil || claim.Status.DeallocationRequested {
		return nil // allocated meanwhile, or on its way out
	}
	if claim, err = w.addFinalizer(ctx, claim); err != nil {
		return w.allocationFailed(ctx, claim, err)
	}
	dctx, cancel := w.driverContext(ctx)
	result, err := w.driver.Allocate(dctx, claim.DeepCopy(), claimParams, class.DeepCopy(), classParams, node)
	cancel()
	if err == nil {
		result, err = completeAllocation(result, w.cfg.DriverName)
	}
	if err != nil {
		where := "for any node"
		if node != "" {
			where = "for node " + node
		}
		return w.allocationFailed(ctx, claim, fmt.Errorf("allocate %s: %w", where, err))
	}
	if err := w.writeAllocation(ctx, claim, result, pod); err != nil {
		return w.allocationFailed(ctx, claim, err)
	}
	w.log.Info("allocated claim", "claim", claim.Namespace+"/"+claim.Name, "node", node, "reservedFor", podName(pod))
	return nil
}

func podName(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Name
}

// allocationFailed records err as an event on the claim (unless the
// controller is stopping) and returns it.
func (w *worker) allocationFailed(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, err error) error {
	err = fmt.Errorf("allocate claim %s/%s: %w", claim.Namespace, claim.Name, err)
	if ctx.Err() == nil {
		w.events.Eventf(claim, corev1.EventTypeWarning, ReasonAllocationFailed, "%v", err)
	}
	return err
}

// writeAllocation stores the allocation (and the pod's reservation) in
// the claim's status, retrying a conflict on a fresh read as long as the
// claim still waits for an allocation.
func (w *worker) writeAllocation(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, a *resourcev1alpha2.AllocationResult, pod *corev1.Pod) error {
	for {
		upd := claim.DeepCopy()
		upd.Status.Allocation = a
		upd.Status.DriverName = w.cfg.DriverName
		upd.Status.ControllerName = w.cfg.ControllerName
		if pod != nil {
			upd.Status.ReservedFor = append(upd.Status.ReservedFor, podReference(pod))
		}
		actx, cancel := w.apiContext(ctx)
		_, err := w.cfg.Client.ResourceClaims(claim.Namespace).UpdateStatus(actx, upd)
		cancel()
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("store allocation: %w", err)
			}
			return nil
		}
		fresh, err := w.getClaim(ctx, claim.Namespace, claim.Name)
		switch {
		case err != nil:
			return err
		case fresh == nil || fresh.UID != claim.UID:
			return fmt.Errorf("store allocation: the claim was deleted")
		case fresh.Status.Allocation != nil || fresh.DeletionTimestamp != nil || fresh.Status.DeallocationRequested:
			return fmt.Errorf("store allocation: the claim changed meanwhile (allocated, deleted or being deallocated)")
		}
		claim = fresh
	}
}

// deallocate releases a claim under its lock, on a fresh read: Driver.Deallocate,
// then the finalizer goes, then the allocation is cleared. Removing the
// finalizer before clearing the status keeps status.driverName, which
// authorizes the driver to write a claim whose class was deleted; a claim
// being deleted disappears with its last finalizer.
func (w *worker) deallocate(ctx context.Context, cached *resourcev1alpha2.ResourceClaim) error {
	unlock, err := w.locks.Lock(ctx, cached.UID)
	if err != nil {
		return fmt.Errorf("wait for other work on claim %s: %w", cached.UID, err)
	}
	defer unlock()
	claim, err := w.getClaim(ctx, cached.Namespace, cached.Name)
	if err != nil || claim == nil || claim.UID != cached.UID {
		return err
	}
	if w.names.claimAction(claim, w.class(claim.Spec.ResourceClassName)) != actionDeallocate {
		return nil
	}
	dctx, cancel := w.driverContext(ctx)
	err = w.driver.Deallocate(dctx, claim.DeepCopy())
	cancel()
	if err != nil {
		err = fmt.Errorf("deallocate claim %s/%s: %w", claim.Namespace, claim.Name, err)
		if ctx.Err() == nil {
			w.events.Eventf(claim, corev1.EventTypeWarning, ReasonDeallocationFailed, "%v", err)
		}
		return err
	}
	if claim, err = w.removeFinalizer(ctx, claim); err != nil {
		return err
	}
	if claim != nil && (claim.Status.Allocation != nil || claim.Status.DeallocationRequested) {
		if err := w.clearAllocation(ctx, claim); err != nil {
			return err
		}
	}
	w.log.Info("deallocated claim", "claim", cached.Namespace+"/"+cached.Name)
	return nil
}

// clearAllocation empties the allocation part of the claim's status.
// Conflicts are returned: the next attempt reads the claim again.
func (w *worker) clearAllocation(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) error {
	upd := claim.DeepCopy()
	upd.Status.Allocation = nil
	upd.Status.DeallocationRequested = false
	upd.Status.DriverName = ""
	upd.Status.ControllerName = ""
	actx, cancel := w.apiContext(ctx)
	defer cancel()
	_, err := w.cfg.Client.ResourceClaims(claim.Namespace).UpdateStatus(actx, upd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clear allocation of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

// getClaim reads a claim from the API server; nil when it does not exist.
func (w *worker) getClaim(ctx context.Context, ns, name string) (*resourcev1alpha2.ResourceClaim, error) {
	actx, cancel := w.apiContext(ctx)
	defer cancel()
	claim, err := w.cfg.Client.ResourceClaims(ns).Get(actx, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read claim %s/%s: %w", ns, name, err)
	}
	return claim, nil
}

// addFinalizer adds the controller's finalizer unless the claim has it.
func (w *worker) addFinalizer(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) (*resourcev1alpha2.ResourceClaim, error) {
	if w.names.hasFinalizer(claim) {
		return claim, nil
	}
	upd := claim.DeepCopy()
	upd.Finalizers = append(upd.Finalizers, w.names.finalizer)
	actx, cancel := w.apiContext(ctx)
	defer cancel()
	out, err := w.cfg.Client.ResourceClaims(claim.Namespace).Update(actx, upd)
	if err != nil {
		return claim, fmt.Errorf("add finalizer %s: %w", w.names.finalizer, err)
	}
	return out, nil
}

// removeFinalizer removes the controller's finalizer and returns the
// claim as stored after it (nil when that deleted it).
func (w *worker) removeFinalizer(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) (*resourcev1alpha2.ResourceClaim, error) {
	if !w.names.hasFinalizer(claim) {
		return claim, nil
	}
	upd := claim.DeepCopy()
	upd.Finalizers = slices.DeleteFunc(upd.Finalizers, func(f string) bool { return f == w.names.finalizer })
	actx, cancel := w.apiContext(ctx)
	defer cancel()
	out, err := w.cfg.Client.ResourceClaims(claim.Namespace).Update(actx, upd)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove finalizer %s from claim %s/%s: %w", w.names.finalizer, claim.Namespace, claim.Name, err)
	}
	if out.DeletionTimestamp != nil && len(out.Finalizers) == 0 {
		return nil, nil // deleted by this write
	}
	return out, nil
}
