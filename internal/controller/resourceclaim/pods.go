package resourceclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/pkg/allocator"
)

// syncPod creates the pod's missing template claims and records them in
// its status, and gives a pod placed by hand the PodSchedulingContext its
// control-plane claims need.
func (c *Controller) syncPod(ctx context.Context, ns, name string) error {
	pod, err := c.pods.Lister().Get(ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var waits, errs []error
	recorded := map[string]string{}
	for _, rc := range ClaimsToCreate(pod) {
		claim, err := c.claimFor(ctx, pod, rc)
		switch {
		case errors.Is(err, controllerutil.ErrWait):
			waits = append(waits, err)
		case err != nil:
			errs = append(errs, err)
		default:
			recorded[rc.Name] = claim
		}
	}
	if len(recorded) > 0 {
		// The claims' creation took a round trip or more: start from the
		// pod as the cache shows it now. The scheduler may have bound it
		// meanwhile, and its binding records a generated claim itself; then
		// there is nothing left to write.
		if cur, err := c.pods.Lister().Get(ns, name); err == nil && cur.UID == pod.UID {
			pod = cur
		}
		if err := c.recordClaims(ctx, pod, recorded); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.syncContext(ctx, pod); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return errors.Join(waits...)
}

// claimFor returns the name of the pod's claim for entry rc, creating it
// from the template unless the controller already did. The claim is
// created in the template's stored version.
func (c *Controller) claimFor(ctx context.Context, pod *corev1.Pod, rc corev1.PodResourceClaim) (string, error) {
	if name := c.existingClaim(pod, rc.Name); name != "" {
		return name, nil
	}
	tmpl, err := c.template(ctx, pod.Namespace, *rc.ResourceClaimTemplateName)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%w: template %s/%s of pod %s does not exist", controllerutil.ErrWait,
			pod.Namespace, *rc.ResourceClaimTemplateName, pod.Name)
	}
	if err != nil {
		return "", fmt.Errorf("read template %s/%s: %w", pod.Namespace, *rc.ResourceClaimTemplateName, err)
	}
	c.created.Inc()
	var claim metav1.Object
	if tmpl.v1 != nil {
		claim, err = createClaim(ctx, c, c.c.ResourceClaimsV1(pod.Namespace), pod, rc.Name, newClaimFromTemplateV1(pod, rc.Name, tmpl.v1))
	} else {
		claim, err = createClaim(ctx, c, c.c.ResourceClaims(pod.Namespace), pod, rc.Name, newClaimFromTemplate(pod, rc.Name, tmpl.v1alpha2))
	}
	if err != nil {
		c.createFailures.Inc()
		if isQuotaError(err) {
			c.events.Eventf(pod, corev1.EventTypeWarning, ReasonFailedCreate,
				"create %s %s from template %s: %v", claimNoun(tmpl.version()), rc.Name, tmpl.name(), err)
			return "", fmt.Errorf("%w: claim %s of pod %s/%s over quota: %w", controllerutil.ErrWait, rc.Name, pod.Namespace, pod.Name, err)
		}
		return "", fmt.Errorf("create %s %s of pod %s/%s: %w", claimNoun(tmpl.version()), rc.Name, pod.Namespace, pod.Name, err)
	}
	c.mu.Lock()
	if c.expected[pod.UID] == nil {
		c.expected[pod.UID] = map[string]string{}
	}
	c.expected[pod.UID][rc.Name] = claim.GetName()
	c.mu.Unlock()
	c.log.Info("created claim from template", "pod", pod.Namespace+"/"+pod.Name, "entry", rc.Name, "claim", claim.GetName(), "version", tmpl.version())
	return claim.GetName(), nil
}

// existingClaim finds a claim the controller created for the pod's entry:
// one it remembers creating, or one in the caches (of either version) that
// the pod controls and that carries the entry's annotation.
func (c *Controller) existingClaim(pod *corev1.Pod, entry string) string {
	c.mu.Lock()
	name := c.expected[pod.UID][entry]
	c.mu.Unlock()
	if name != "" {
		return name
	}
	owner := pod.Namespace + "/" + string(pod.UID)
	if claims, err := c.claims.Lister().ByIndex(ownerPodIndex, owner); err == nil {
		for _, cl := range claims {
			if cl.DeletionTimestamp == nil && allocator.IsPodClaim(cl, pod, entry) {
				return cl.Name
			}
		}
	}
	if claims, err := c.claimsV1.Lister().ByIndex(ownerPodIndex, owner); err == nil {
		for _, cl := range claims {
			if cl.DeletionTimestamp == nil && allocator.IsPodClaimV1(cl, pod, entry) {
				return cl.Name
			}
		}
	}
	return ""
}

func isQuotaError(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// recordClaims adds the claims to the pod's status.resourceClaimStatuses:
// first to the pod as the cache shows it, then, after a conflict, to a
// fresh read of it.
func (c *Controller) recordClaims(ctx context.Context, pod *corev1.Pod, claims map[string]string) error {
	pods := c.c.Pods(pod.Namespace)
	cached := pod
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := cached.DeepCopy()
		if cur == nil {
			gctx, cancel := c.apiContext(ctx)
			fresh, err := pods.Get(gctx, pod.Name)
			cancel()
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			cur = fresh
		}
		cached = nil
		if cur.UID != pod.UID {
			return nil // the pod was replaced; its claims go with the old owner
		}
		changed := false
		for entry, claim := range claims {
			if recordedClaim(cur, entry) {
				continue
			}
			cur.Status.ResourceClaimStatuses = append(cur.Status.ResourceClaimStatuses,
				corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: &claim})
			changed = true
		}
		if !changed {
			return nil
		}
		uctx, cancel := c.apiContext(ctx)
		defer cancel()
		_, err := pods.UpdateStatus(uctx, cur)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("record claims of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
