package pods

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

// gracePeriod is how long containers get between TERM and KILL:
// min(deletionGracePeriodSeconds, spec.terminationGracePeriodSeconds),
// capped by Timing.MaxGracePeriod.
func (w *Worker) gracePeriod() time.Duration {
	secs := int64(30)
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		secs = *g
	}
	if g := w.pod.DeletionGracePeriodSeconds; g != nil && *g < secs {
		secs = *g
	}
	d := time.Duration(max(secs, 0)) * time.Second
	if m := w.cfg.Timing.MaxGracePeriod; m > 0 && d > m {
		d = m
	}
	if w.final != nil && w.final.grace != nil && *w.final.grace < d {
		d = max(*w.final.grace, 0)
	}
	return d
}

// terminate drives a pod being deleted (or gone from the API) to its end:
// stop every container with the grace period, release the pod's
// resources, report the final status, remove the containers, then
// complete the deletion in the API and drop the pod's files. Each step is
// retried at the next sync until it succeeds. Resources are released
// before the final status is reported, as finish does: a scheduler frees a
// pod's resources once its status is terminal, and may place the next pod
// here at once.
func (w *Worker) terminate(ctx context.Context, now time.Time) time.Time {
	retry := now.Add(w.cfg.Timing.Retry)
	if !w.stopAll(ctx, now, w.gracePeriod()) {
		return retry
	}
	if w.final == nil {
		inits, mains := w.containerStatuses(now)
		w.final = &final{phase: finalPhase(inits, mains)}
		w.finalAt = now
	}
	if ok, at := w.release(ctx); !ok {
		return laterOf(retry, at)
	}
	if !w.gone && w.report(ctx, now) {
		return retry
	}
	if !w.removeAll(ctx) {
		return retry
	}
	if !w.gone {
		actx, cancel := context.WithTimeout(ctx, w.cfg.Timing.APITimeout)
		err := w.cfg.API.DeletePod(actx, w.pod.Namespace, w.pod.Name, w.pod.UID)
		cancel()
		// NotFound: already gone. Conflict: the UID precondition failed, so
		// the name now belongs to a new pod and this one is gone.
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			w.log.Warn("complete pod deletion", "err", err)
			return retry
		}
		w.cfg.Metrics.PodDeletionsDone.Inc()
		w.log.Info("pod deletion completed")
	}
	if w.cfg.RootDir != "" {
		if err := podfiles.RemovePod(w.cfg.RootDir, w.key); err != nil {
			w.log.Warn("remove pod files", "err", err)
		}
	}
	w.setRunningMetric(false)
	w.finished = true
	return time.Time{}
}

// finish handles a pod that has finished: containers still running (a
// rejection or deadline) are stopped, resources released, and after
// Timing.TerminatedCleanup the containers are removed. The status stays.
func (w *Worker) finish(ctx context.Context, now time.Time) time.Time {
	retry := now.Add(w.cfg.Timing.Retry)
	if !w.stopAll(ctx, now, w.gracePeriod()) {
		return retry
	}
	if ok, at := w.release(ctx); !ok {
		return laterOf(retry, at)
	}
	if w.cleaned {
		return time.Time{}
	}
	if at := w.finalAt.Add(w.cfg.Timing.TerminatedCleanup); now.Before(at) {
		return at
	}
	if !w.removeAll(ctx) {
		return retry
	}
	w.cleaned = true
	return time.Time{}
}

// stopAll stops every container that may run, in parallel, each with the
// grace period; it reports whether all are stopped. Their exits are
// recorded as final.
func (w *Worker) stopAll(ctx context.Context, now time.Time, grace time.Duration) bool {
	defer w.settle()
	var stopping []*ctr
	for _, c := range w.all() {
		if c.active() {
			stopping = append(stopping, c)
		}
	}
	if len(stopping) == 0 {
		return true
	}
	errs := make([]error, len(stopping))
	var wg sync.WaitGroup
	for i, c := range stopping {
		w.event(corev1.EventTypeNormal, "Killing", "Stopping container %s", c.name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, grace+w.cfg.Timing.RuntimeTimeout)
			defer cancel()
			errs[i] = w.cfg.Runtime.Stop(sctx, c.id, grace)
		}()
	}
	wg.Wait()
	for i, c := range stopping {
		if errs[i] != nil {
			w.log.Warn("stop container", "container", c.name, "err", errs[i])
		}
	}
	w.refresh(ctx, now)
	for _, c := range stopping {
		if c.active() {
			return false
		}
	}
	return true
}

// settle marks exited containers that waited for a restart as done: the
// pod is ending, nothing restarts.
func (w *Worker) settle() {
	for _, c := range w.all() {
		if c.done == nil && c.id != "" && c.rt.State == runtime.StateExited {
			c.done = terminatedState(c.rt, w.containerID(c.id))
		}
	}
}

// release calls the Releasers once, after the pod's containers stopped for
// good; a pod that was never admitted and never ran holds nothing. On
// failure it returns when to try again, if the Releaser said (RetryAfter).
func (w *Worker) release(ctx context.Context) (bool, time.Time) {
	if w.released || !w.holdsResources {
		return true, time.Time{}
	}
	for _, a := range w.cfg.Hooks.Admitters {
		r, ok := a.(Releaser)
		if !ok {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
		err := r.Release(rctx, w.pod)
		cancel()
		if err == nil {
			continue
		}
		var ra RetryAfter
		if !errors.As(err, &ra) {
			w.log.Warn("release pod resources", "err", err)
			return false, time.Time{}
		}
		if !ra.BackingOff() {
			w.log.Warn("release pod resources", "err", err, "retry at", ra.RetryAt().Format(time.RFC3339))
		}
		return false, ra.RetryAt()
	}
	w.released = true
	return true, time.Time{}
}

// laterOf is the later of two times.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// removeAll removes every container of the pod from the runtime.
func (w *Worker) removeAll(ctx context.Context) bool {
	ok := true
	for _, c := range w.all() {
		if c.id == "" {
			continue
		}
		if c.rt.State != runtime.StateExited {
			ok = false
			continue
		}
		if !w.removeContainer(ctx, c.id) {
			ok = false
			continue
		}
		c.id = ""
	}
	return ok
}
