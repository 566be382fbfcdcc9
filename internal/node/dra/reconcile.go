package dra

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
)

// reconcile releases, after a restart, the checkpointed claims of pods
// that no pod worker will release: pods deleted while no agent ran, and
// pods that finished (their workers release only pods that left
// containers behind). It retries every BackoffInitial until all are done
// or ctx ends; a pod's own unprepare back-off still applies.
func (m *Manager) reconcile(ctx context.Context) {
	todo := m.store.pods()
	for len(todo) > 0 {
		var left []podKey
		for _, p := range todo {
			if !m.reconcilePod(ctx, p) {
				left = append(left, p)
			}
		}
		todo = left
		if len(todo) == 0 || !sleepCtx(ctx, m.opts.BackoffInitial) {
			return
		}
	}
}

// reconcilePod reports whether p needs no more attention here.
func (m *Manager) reconcilePod(ctx context.Context, p podKey) bool {
	actx, cancel := m.apiContext(ctx)
	pod, err := m.opts.Client.Pods(p.Namespace).Get(actx, p.Name)
	cancel()
	switch {
	case apierrors.IsNotFound(err) || (err == nil && pod.UID != p.UID):
		if err := m.releasePod(ctx, p); err != nil {
			m.log.Warn("DRA manager: unprepare claims of a deleted pod", "pod", p.Namespace+"/"+p.Name, "uid", string(p.UID), "err", err)
			return false
		}
		m.pods.forget(p.UID)
		m.log.Info("DRA manager: unprepared the claims of a pod deleted while no agent ran", "pod", p.Namespace+"/"+p.Name, "uid", string(p.UID))
		return true
	case err != nil:
		m.log.Warn("DRA manager: read pod of a prepared claim", "pod", p.Namespace+"/"+p.Name, "err", err)
		return false
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		if err := m.Release(ctx, pod); err != nil {
			m.log.Warn("DRA manager: release finished pod", "pod", p.Namespace+"/"+p.Name, "err", err)
			return false
		}
		return true
	}
	return true // alive: its worker releases it when it ends
}

// sleepCtx waits for d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
