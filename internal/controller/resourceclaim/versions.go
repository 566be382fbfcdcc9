package resourceclaim

import (
	"context"
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/pkg/allocator"
	"allot.dev/allot/pkg/client"
)

// Claims and claim templates of resource.k8s.io/v1alpha2 and v1 are one
// set of objects, each stored in the version it was written in and read
// through the other version as a view (resourcev1alpha2.IsView). The
// controller handles every object through its stored version: a claim
// through the informer and client of its version (views are skipped), a
// claim generated from a template in the template's version. v1 claims
// have no control-plane controller and no allocation mode: every
// allocated v1 claim is structured (the scheduler writes it through
// pods/binding, with the delete-protection finalizer) and waits for its
// first consumer, so promises 1 to 3 of the package apply to them as to
// structured WaitForFirstConsumer v1alpha2 claims; 4 and 5 do not.

// The stored versions, as logs and events name them.
var (
	versionV1alpha2 = resourcev1alpha2.SchemeGroupVersion.String()
	versionV1       = resourcev1.SchemeGroupVersion.String()
)

// claimPtr is a ResourceClaim of either version.
type claimPtr interface {
	*resourcev1alpha2.ResourceClaim | *resourcev1.ResourceClaim
	runtime.Object
	metav1.Object
}

// claimTemplate is a ResourceClaimTemplate as stored: exactly one of the
// two is set.
type claimTemplate struct {
	v1alpha2 *resourcev1alpha2.ResourceClaimTemplate
	v1       *resourcev1.ResourceClaimTemplate
}

func (t claimTemplate) name() string {
	if t.v1 != nil {
		return t.v1.Name
	}
	return t.v1alpha2.Name
}

// version is the template's stored version, which its claims get.
func (t claimTemplate) version() string {
	if t.v1 != nil {
		return versionV1
	}
	return versionV1alpha2
}

// claimNoun names a claim of the version in messages: "claim" for the
// seed's v1alpha2 (the messages read as they did before v1), else
// "resource.k8s.io/v1 claim".
func claimNoun(version string) string {
	if version == versionV1alpha2 {
		return "claim"
	}
	return version + " claim"
}

// storedVersion is the version a claim read through version is stored
// in: version itself, or the one a view names.
func storedVersion(claim metav1.Object, version string) string {
	if v, ok := claim.GetAnnotations()[resourcev1alpha2.StoredVersionAnnotation]; ok {
		return v
	}
	return version
}

// newClaimFromTemplateV1 is newClaimFromTemplate for a v1 template.
func newClaimFromTemplateV1(pod *corev1.Pod, entry string, tmpl *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaim {
	return allocator.NewClaimFromTemplateV1(pod, entry, tmpl, allocator.GeneratedClaimName(pod, entry))
}

// isPodClaim is allocator.IsPodClaim for a claim of either version (or a
// view: only the metadata counts).
func isPodClaim(claim metav1.Object, pod *corev1.Pod, entry string) bool {
	switch cl := claim.(type) {
	case *resourcev1alpha2.ResourceClaim:
		return allocator.IsPodClaim(cl, pod, entry)
	case *resourcev1.ResourceClaim:
		return allocator.IsPodClaimV1(cl, pod, entry)
	}
	return false
}

// consumersV1 is a v1 claim's reservedFor in v1alpha2 terms (the same
// fields), for ReservationObsolete.
func consumersV1(refs []resourcev1.ResourceClaimConsumerReference) []resourcev1alpha2.ResourceClaimConsumerReference {
	out := make([]resourcev1alpha2.ResourceClaimConsumerReference, len(refs))
	for i, r := range refs {
		out[i] = resourcev1alpha2.ResourceClaimConsumerReference(r)
	}
	return out
}

// StructuredV1 reports whether the v1 claim is this controller's to
// deallocate: it carries the delete-protection finalizer (every v1
// allocation is structured).
func StructuredV1(claim *resourcev1.ResourceClaim) bool {
	return slices.Contains(claim.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer)
}

// ShouldDeallocateV1 reports whether the v1 claim's allocation is to be
// cleared: it is structured, allocated and reserved by nobody (v1 claims
// have no Immediate mode).
func ShouldDeallocateV1(claim *resourcev1.ResourceClaim) bool {
	return StructuredV1(claim) && claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 0
}

// ShouldRemoveFinalizerV1 reports whether the delete-protection finalizer
// of the v1 claim protects nothing any more: it is not allocated.
func ShouldRemoveFinalizerV1(claim *resourcev1.ResourceClaim) bool {
	return StructuredV1(claim) && claim.Status.Allocation == nil && len(claim.Status.ReservedFor) == 0
}

// releaseV1 is the status change syncClaimV1 writes: it removes the
// reservations of the dropped pods and, once nobody reserves the claim,
// clears its allocation, together with the drivers' device statuses (the
// server accepts statuses of allocated devices only). It reports whether
// anything changed.
func releaseV1(claim *resourcev1.ResourceClaim, drop map[types.UID]bool) bool {
	n := len(claim.Status.ReservedFor)
	claim.Status.ReservedFor = slices.DeleteFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
		return drop[r.UID]
	})
	changed := len(claim.Status.ReservedFor) != n
	if ShouldDeallocateV1(claim) {
		claim.Status.Allocation = nil
		claim.Status.Devices = nil
		changed = true
	}
	return changed
}

func claimNeedsWorkV1(claim *resourcev1.ResourceClaim) bool {
	return len(claim.Status.ReservedFor) > 0 || StructuredV1(claim)
}

func (c *Controller) onClaimV1(obj any) {
	if claim, ok := obj.(*resourcev1.ResourceClaim); ok && claimNeedsWorkV1(claim) {
		c.queue.Add(key{kindClaimV1, claim.Namespace, claim.Name})
	}
}

// syncClaimV1 is syncClaim for a claim stored as v1: it drops obsolete
// reservations and deallocates the claim once nobody reserves it, in one
// status write, then removes the finalizer.
func (c *Controller) syncClaimV1(ctx context.Context, ns, name string) error {
	claim, err := c.claimsV1.Lister().Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if resourcev1alpha2.IsView(claim) || c.cacheBehind(claim) {
		return nil
	}
	drop, err := c.obsoleteReservations(ctx, key{kindClaimV1, ns, name}, claim, consumersV1(claim.Status.ReservedFor),
		fence.AllocationV1ReachesOtherNodes(claim.Status.Allocation))
	if err != nil {
		return err
	}
	claims := c.c.ResourceClaimsV1(ns)
	if len(drop) > 0 || ShouldDeallocateV1(claim) {
		deallocated := false
		claim, err = writeClaim(ctx, c, claims, claim, true, func(cl *resourcev1.ResourceClaim) bool {
			allocated := cl.Status.Allocation != nil
			changed := releaseV1(cl, drop)
			deallocated = allocated && cl.Status.Allocation == nil
			return changed
		})
		if err != nil {
			return fmt.Errorf("release %s claim %s/%s: %w", versionV1, ns, name, err)
		}
		if claim == nil {
			return nil
		}
		c.log.Info("released claim", "claim", ns+"/"+name, "version", versionV1, "droppedPods", len(drop), "deallocated", deallocated)
	}
	if !ShouldRemoveFinalizerV1(claim) {
		return nil
	}
	_, err = writeClaim(ctx, c, claims, claim, false, func(cl *resourcev1.ResourceClaim) bool {
		if !ShouldRemoveFinalizerV1(cl) {
			return false
		}
		cl.Finalizers = slices.DeleteFunc(cl.Finalizers, func(f string) bool { return f == resourcev1alpha2.DeleteProtectionFinalizer })
		return true
	})
	if err != nil {
		return fmt.Errorf("remove finalizer of %s claim %s/%s: %w", versionV1, ns, name, err)
	}
	return nil
}

// writeClaim applies change to a fresh copy of the claim and writes it
// (status or main resource) through the client of its stored version,
// retrying on conflicts. change returns false when nothing is left to do.
// The result is nil when the claim is gone (or was replaced, also by an
// object of the other version).
func writeClaim[T claimPtr, L runtime.Object](ctx context.Context, c *Controller, claims *client.Resource[T, L], claim T, status bool,
	change func(T) bool) (T, error) {
	cur := claim.DeepCopyObject().(T)
	first := true
	var out T
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if !first {
			gctx, cancel := c.apiContext(ctx)
			fresh, err := claims.Get(gctx, claim.GetName())
			cancel()
			if err != nil {
				return err
			}
			if fresh.GetUID() != claim.GetUID() || resourcev1alpha2.IsView(fresh) {
				return apierrors.NewNotFound(resourcev1alpha2.Resource("resourceclaims"), claim.GetName())
			}
			cur = fresh
		}
		first = false
		if !change(cur) {
			out = cur
			return nil
		}
		uctx, cancel := c.apiContext(ctx)
		defer cancel()
		var err error
		if status {
			out, err = claims.UpdateStatus(uctx, cur)
		} else {
			out, err = claims.Update(uctx, cur)
		}
		if err == nil {
			c.wrote(out)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		var gone T
		return gone, nil
	}
	return out, err
}

// createClaim creates the claim generated for the pod's entry through the
// client of its version. When a claim of that name exists, the pod's own
// (from a create whose answer was lost) is used; a claim being deleted is
// waited for; a claim that is not the pod's is an error that names it.
// The pod's own claim may be stored in the other version (its template
// was replaced by one of the other version meanwhile): then the result is
// a view, and only its name is used.
func createClaim[T claimPtr, L runtime.Object](ctx context.Context, c *Controller, claims *client.Resource[T, L], pod *corev1.Pod, entry string,
	want T) (T, error) {
	cctx, cancel := c.apiContext(ctx)
	claim, err := claims.Create(cctx, want)
	cancel()
	if !apierrors.IsAlreadyExists(err) {
		return claim, err
	}
	// An earlier create of this claim whose answer was lost, or a claim of
	// that name that is not this pod's.
	name := want.GetName()
	cctx, cancel = c.apiContext(ctx)
	defer cancel()
	var none T
	cl, err := claims.Get(cctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return none, fmt.Errorf("%w: claim %s/%s existed, then went away", controllerutil.ErrWait, pod.Namespace, name)
	case err != nil:
		return none, fmt.Errorf("read existing claim %s/%s: %w", pod.Namespace, name, err)
	case !isPodClaim(cl, pod, entry):
		c.events.Eventf(pod, corev1.EventTypeWarning, ReasonFailedCreate,
			"claim %s for entry %s: a ResourceClaim of that name exists and was not generated for this pod", name, entry)
		return none, fmt.Errorf("claim %s/%s for entry %s of pod %s exists and is not the pod's", pod.Namespace, name, entry, pod.Name)
	case cl.GetDeletionTimestamp() != nil:
		return none, fmt.Errorf("%w: the pod's claim %s/%s is being deleted", controllerutil.ErrWait, pod.Namespace, name)
	}
	c.log.Info("found the claim of an earlier create", "pod", pod.Namespace+"/"+pod.Name, "entry", entry, "claim", name,
		"version", storedVersion(cl, claims.GroupVersionResource().GroupVersion().String()))
	return cl, nil
}

// template reads a claim template from the informers' caches, or from the
// API server when the caches do not have it (yet), in its stored version.
func (c *Controller) template(ctx context.Context, ns, name string) (claimTemplate, error) {
	if t, err := c.tmpls.Lister().Get(ns, name); err == nil && !resourcev1alpha2.IsView(t) {
		return claimTemplate{v1alpha2: t}, nil
	}
	if t, err := c.tmplsV1.Lister().Get(ns, name); err == nil && !resourcev1alpha2.IsView(t) {
		return claimTemplate{v1: t}, nil
	}
	tctx, cancel := c.apiContext(ctx)
	defer cancel()
	t, err := c.c.ResourceClaimTemplates(ns).Get(tctx, name)
	if err != nil {
		return claimTemplate{}, err
	}
	if !resourcev1alpha2.IsView(t) {
		return claimTemplate{v1alpha2: t}, nil
	}
	t1, err := c.c.ResourceClaimTemplatesV1(ns).Get(tctx, name)
	if err != nil {
		return claimTemplate{}, err
	}
	if resourcev1alpha2.IsView(t1) {
		// Replaced by a template of the other version between the reads.
		return claimTemplate{}, fmt.Errorf("template %s/%s changed version while read", ns, name)
	}
	return claimTemplate{v1: t1}, nil
}
