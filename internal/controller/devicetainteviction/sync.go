package devicetainteviction

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/controller/taineviction"
)

// syncPod decides whether a pod must go, and when, from the devices of
// the claims reserved for it; it evicts it when due, requeues it for when
// it will be, and cancels a pending eviction no taint calls for anymore.
func (d *Controller) syncPod(ctx context.Context, key types.NamespacedName) error {
	pod, err := d.pods.Lister().Get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return nil // podDeleted forgot it
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		d.forget(pod.UID)
		return nil
	}
	uses, err := d.podUses(pod)
	if err != nil {
		return err
	}
	now := d.opts.Now()
	due, evict := EvictionTime(uses, d.taintsOf(nil), now)
	if !evict {
		if d.forget(pod.UID) {
			d.events.Eventf(pod, corev1.EventTypeNormal, EventReasonEviction, "Cancelling deletion")
			d.opts.Logger.Info("cancelled pod eviction", "pod", key)
		}
		return nil
	}
	d.remember(pod, due)
	if wait := due.At.Sub(now); wait > 0 {
		d.podQ.AddAfter(key, wait)
		return nil
	}
	if wait := d.opts.Limiter.Take(now); wait > 0 {
		d.podQ.AddAfter(key, wait)
		return nil
	}
	return d.evict(ctx, pod, due)
}

// evict deletes a pod through the shared eviction path.
func (d *Controller) evict(ctx context.Context, pod *corev1.Pod, due Due) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := d.opts.Now()
	deleted, err := taineviction.EvictPod(cctx, d.c, pod, taineviction.Eviction{Reason: ReasonDeletionByDeviceTaintManager,
		Message: "Device Taint manager: deleting due to NoExecute taint"}, now)
	if err != nil {
		return err
	}
	d.forget(pod.UID)
	if !deleted {
		return nil
	}
	d.deleted.Inc()
	d.latency.Observe(now.Sub(due.At).Seconds())
	d.events.Eventf(pod, corev1.EventTypeNormal, EventReasonEviction, "Marking for deletion")
	d.opts.Logger.Info("evicted pod", "pod", pod.Namespace+"/"+pod.Name, "taints", due.String())
	d.mu.Lock()
	seen := map[types.UID]bool{}
	for _, c := range due.Causes {
		if c.Rule != "" && !seen[c.RuleUID] {
			seen[c.RuleUID] = true
			d.evicted[c.RuleUID]++
		}
	}
	d.mu.Unlock()
	return nil
}

// remember records a pod's pending eviction; the rules among its causes,
// before and after, get their status looked at.
func (d *Controller) remember(pod *corev1.Pod, due Due) {
	d.mu.Lock()
	old, had := d.pending[pod.UID]
	d.pending[pod.UID] = pendingEviction{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, due: due}
	d.mu.Unlock()
	if had {
		d.touchRules(old.due)
	}
	d.touchRules(due)
}

// forget drops a pod's pending eviction and reports whether it had one.
func (d *Controller) forget(uid types.UID) bool {
	d.mu.Lock()
	old, had := d.pending[uid]
	delete(d.pending, uid)
	d.mu.Unlock()
	if had {
		d.touchRules(old.due)
	}
	return had
}

// touchRules queues the status of the rules among a due's causes.
func (d *Controller) touchRules(due Due) {
	for _, c := range due.Causes {
		if c.Rule != "" {
			d.ruleQ.Add(c.Rule)
		}
	}
}
