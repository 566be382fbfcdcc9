package resourceclaim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/fence"
)

// syncClaim drops obsolete reservations, then deallocates the claim and
// removes its finalizer when nobody uses it.
func (c *Controller) syncClaim(ctx context.Context, ns, name string) error {
	claim, err := c.claims.Lister().Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if resourcev1alpha2.IsView(claim) {
		return nil // stored as v1: syncClaimV1's
	}
	if c.cacheBehind(claim) {
		// The cache has not caught up with this controller's own last
		// write: syncing the old copy would only conflict. The write's
		// event syncs the claim again.
		return nil
	}
	drop, err := c.obsoleteReservations(ctx, key{kindClaim, ns, name}, claim, claim.Status.ReservedFor,
		fence.AllocationReachesOtherNodes(claim.Status.Allocation))
	if err != nil {
		return err
	}
	class := c.class(claim.Spec.ResourceClassName)
	if len(drop) > 0 {
		if claim, err = c.dropReservations(ctx, claim, class, drop); err != nil || claim == nil {
			return err
		}
	}
	if ShouldDeallocate(claim, class) {
		if claim, err = c.deallocate(ctx, claim); err != nil || claim == nil {
			return err
		}
	}
	if ShouldRemoveFinalizer(claim, class) {
		return c.removeFinalizer(ctx, claim)
	}
	return nil
}

// wrote remembers the resourceVersion of the controller's own write of a
// claim (of either version), until the cache shows it.
func (c *Controller) wrote(claim metav1.Object) {
	rv, err := strconv.ParseUint(claim.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[claim.GetUID()] = rv
}

// cacheBehind reports whether the cached claim is older than the
// controller's own last write of it.
func (c *Controller) cacheBehind(claim metav1.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.written[claim.GetUID()]
	if !ok {
		return false
	}
	if rv, err := strconv.ParseUint(claim.GetResourceVersion(), 10, 64); err != nil || rv >= w {
		delete(c.written, claim.GetUID())
		return false
	}
	return true
}

// class returns the claim's class from the cache, nil when unknown.
func (c *Controller) class(name string) *resourcev1alpha2.ResourceClass {
	cl, err := c.classes.Lister().Get("", name)
	if err != nil {
		return nil
	}
	return cl
}

// obsoleteReservations returns the UIDs of the pods whose reservations
// (the reservedFor of claim, synced under key k) may go. A pod missing
// from the cache (or replaced under the same name) is confirmed gone with
// a live read, and its reservation then goes only once no node still
// holds the claim prepared for it (preparedOn; the release rule in
// release.go) or the fencing rule releases it (FencedRelease; multi says
// the claim holds devices other nodes can reach). A pod being deleted on
// a node that is unreachable, out of service or deleted is judged by the
// fencing rule too. A wait the rule can date re-enqueues k for then.
func (c *Controller) obsoleteReservations(ctx context.Context, k key, claim runtimeObject,
	reservedFor []resourcev1alpha2.ResourceClaimConsumerReference, multi bool) (map[types.UID]bool, error) {
	ns := claim.GetNamespace()
	drop := map[types.UID]bool{}
	var retryAt time.Time
	for _, ref := range reservedFor {
		pod, err := c.pods.Lister().Get(ns, ref.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err != nil {
			pod = nil
		}
		if !ReservationObsolete(ref, pod) {
			if !evicting(ref, pod) {
				continue
			}
			v, err := c.fenced(ctx, pod, pod.Spec.NodeName, false, multi)
			if err != nil {
				return nil, err
			}
			retryAt = earliest(retryAt, v.At)
			if v.Release {
				c.noteFenced(claim, ns+"/"+ref.Name, pod.Spec.NodeName, multi)
				drop[ref.UID] = true
			}
			continue
		}
		if pod == nil || pod.UID != ref.UID {
			if pod, err = c.livePod(ctx, ns, ref.Name); err != nil {
				return nil, err
			}
			if !ReservationObsolete(ref, pod) {
				continue
			}
			if pod == nil || pod.UID != ref.UID {
				release, at, err := c.goneReleased(ctx, claim, ref, multi)
				if err != nil {
					return nil, err
				}
				retryAt = earliest(retryAt, at)
				if !release {
					continue
				}
			}
		}
		drop[ref.UID] = true
	}
	if !retryAt.IsZero() {
		c.queue.AddAfter(k, time.Until(retryAt)+10*time.Millisecond)
	}
	return drop, nil
}

// goneReleased decides the reservation of a pod confirmed gone: released
// once no node lists the claim for it, or by the fencing rule when the
// node that lists it (or last held the pod) is unreachable, out of
// service or deleted. at is when to look again (zero: on news).
func (c *Controller) goneReleased(ctx context.Context, claim runtimeObject, ref resourcev1alpha2.ResourceClaimConsumerReference, multi bool) (bool, time.Time, error) {
	ns := claim.GetNamespace()
	node, gone, err := c.preparedOn(ctx, claim.GetUID(), ref.UID)
	if err != nil {
		return false, time.Time{}, err
	}
	if node == "" && !gone && (!multi || c.nodeKnown(ref.UID)) {
		c.mu.Lock()
		delete(c.waitNoted, string(claim.GetUID())+"/"+string(ref.UID))
		c.mu.Unlock()
		return true, time.Time{}, nil
	}
	v, err := c.fenced(ctx, nil, node, node == "", multi)
	if err != nil {
		return false, time.Time{}, err
	}
	if v.Release {
		c.noteFenced(claim, ns+"/"+ref.Name, node, multi)
		return true, time.Time{}, nil
	}
	c.noteWait(claim, ns+"/"+ref.Name, ref.UID, node, v.Why)
	return false, v.At, nil
}

// noteFenced logs, counts and records (a Normal event on the claim) that
// the fencing rule releases the reservation of pod on node. A release
// whose write is retried (a conflict) is decided, and counted, again.
func (c *Controller) noteFenced(claim runtimeObject, pod, node string, multi bool) {
	c.log.Info("fencing rule releases reservation", "claim", claim.GetNamespace()+"/"+claim.GetName(), "pod", pod, "node", node, "multiNode", multi)
	devices := devicesNodeLocal
	if multi {
		devices = devicesMultiNode
	}
	c.fencedReleases.WithLabelValues(devices).Inc()
	if c.events == nil {
		return
	}
	if node == "" {
		node = "(unknown)"
	}
	what := "holds only node-local devices"
	if multi {
		what = "holds devices other nodes can reach, and the node's fence time plus margin has passed since its last heartbeat"
	}
	c.events.Eventf(claim, corev1.EventTypeNormal, ReasonFencedRelease,
		"reservation of pod %s released without node %s: the node is unreachable, out of service or deleted, and the claim %s", pod, node, what)
}

// evicting reports whether the reservation's pod is being deleted and
// still running as far as the API knows: the fencing rule's case.
func evicting(ref resourcev1alpha2.ResourceClaimConsumerReference, pod *corev1.Pod) bool {
	return ref.APIGroup == "" && ref.Resource == "pods" && pod != nil && pod.UID == ref.UID &&
		pod.DeletionTimestamp != nil && pod.Spec.NodeName != ""
}

// earliest is the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// livePod reads a pod from the server; nil when it does not exist.
func (c *Controller) livePod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	gctx, cancel := c.apiContext(ctx)
	defer cancel()
	pod, err := c.c.Pods(ns).Get(gctx, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}

// updateClaim applies change to a fresh copy of the claim and writes it
// (status or main resource), retrying on conflicts. change returns false
// when nothing is left to do. The result is nil when the claim is gone.
func (c *Controller) updateClaim(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, status bool,
	change func(*resourcev1alpha2.ResourceClaim) bool) (*resourcev1alpha2.ResourceClaim, error) {
	return writeClaim(ctx, c, c.c.ResourceClaims(claim.Namespace), claim, status, change)
}

// dropReservations removes the obsolete reservations; when that leaves a
// WaitForFirstConsumer control-plane claim unused, the same write asks its
// driver to deallocate it, and an unused structured claim it deallocates.
func (c *Controller) dropReservations(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, class *resourcev1alpha2.ResourceClass,
	drop map[types.UID]bool) (*resourcev1alpha2.ResourceClaim, error) {
	requested := false
	out, err := c.updateClaim(ctx, claim, true, func(cl *resourcev1alpha2.ResourceClaim) bool {
		n := len(cl.Status.ReservedFor)
		cl.Status.ReservedFor = slices.DeleteFunc(cl.Status.ReservedFor, func(r resourcev1alpha2.ResourceClaimConsumerReference) bool {
			return drop[r.UID]
		})
		if len(cl.Status.ReservedFor) == n {
			return false
		}
		requested = cl.DeletionTimestamp == nil && ShouldRequestDeallocation(cl, class)
		if requested {
			cl.Status.DeallocationRequested = true
		}
		if ShouldDeallocate(cl, class) {
			// Unused structured claim: deallocate in the same write.
			cl.Status.Allocation = nil
			cl.Status.DriverName = ""
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("drop reservations of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	c.log.Info("dropped reservations", "claim", claim.Namespace+"/"+claim.Name, "version", versionV1alpha2, "pods", len(drop), "deallocationRequested", requested)
	return out, nil
}

func (c *Controller) deallocate(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) (*resourcev1alpha2.ResourceClaim, error) {
	class := c.class(claim.Spec.ResourceClassName)
	out, err := c.updateClaim(ctx, claim, true, func(cl *resourcev1alpha2.ResourceClaim) bool {
		if !ShouldDeallocate(cl, class) {
			return false
		}
		cl.Status.Allocation = nil
		cl.Status.DriverName = ""
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("deallocate claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	c.log.Info("deallocated claim", "claim", claim.Namespace+"/"+claim.Name, "version", versionV1alpha2)
	return out, nil
}

func (c *Controller) removeFinalizer(ctx context.Context, claim *resourcev1alpha2.ResourceClaim) error {
	class := c.class(claim.Spec.ResourceClassName)
	_, err := c.updateClaim(ctx, claim, false, func(cl *resourcev1alpha2.ResourceClaim) bool {
		if !ShouldRemoveFinalizer(cl, class) {
			return false
		}
		cl.Finalizers = slices.DeleteFunc(cl.Finalizers, func(f string) bool { return f == resourcev1alpha2.DeleteProtectionFinalizer })
		return true
	})
	if err != nil {
		return fmt.Errorf("remove finalizer of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}
