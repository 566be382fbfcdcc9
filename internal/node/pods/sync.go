package pods

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

// Sync runs one step of the pod's state machine: observe the containers,
// act (start, restart, stop, remove, complete the deletion), report the
// status. It returns when the worker next wants to run without news (zero:
// only on news). Tests call it directly; Run calls it in a loop.
func (w *Worker) Sync(ctx context.Context) time.Time {
	now := w.cfg.Now()
	if !w.setUp {
		w.setup(ctx, now)
	}
	if w.gone || w.pod.DeletionTimestamp != nil {
		w.deleting = true
	}
	w.refresh(ctx, now)
	var next time.Time
	if w.deleting {
		next = w.terminate(ctx, now)
		w.publish()
		return next
	}
	if w.final == nil {
		w.monitor(now)
	}
	if w.final == nil {
		next = w.run(ctx, now)
		w.decide(now)
	}
	if w.final != nil {
		next = w.finish(ctx, now)
	}
	if w.report(ctx, now) {
		next = earliest(next, now.Add(w.cfg.Timing.Retry))
	}
	w.publish()
	if w.final == nil {
		next = earliest(next, now.Add(w.cfg.Timing.Resync))
	}
	return next
}

// run starts what should run: init containers one at a time in order,
// then every container in order. It returns the earliest back-off end.
func (w *Worker) run(ctx context.Context, now time.Time) time.Time {
	if d := w.pod.Spec.ActiveDeadlineSeconds; d != nil && !w.startTime.IsZero() &&
		now.Sub(w.startTime) >= time.Duration(*d)*time.Second {
		w.fail(now, ReasonDeadlineExceeded, messageDeadlineExceeded)
		return time.Time{}
	}
	if w.startTime.IsZero() {
		w.startTime = now
	}
	for _, c := range w.inits {
		switch {
		case c.done != nil && c.done.ExitCode == 0:
			continue
		case c.done != nil || c.active():
			return time.Time{} // failed for good (the phase says so), or still running
		}
		return w.startContainer(ctx, c, now)
	}
	var next time.Time
	for _, c := range w.mains {
		if c.done != nil || (c.active() && c.rt.State != runtime.StateCreated) {
			continue
		}
		next = earliest(next, w.startContainer(ctx, c, now))
		if w.final != nil {
			return time.Time{}
		}
		if !w.admitted && w.hold != nil {
			return next // held: ask the admitters once per sync
		}
	}
	return next
}

// startContainer creates and starts the next attempt of c, once its
// back-off has passed and the pod is admitted. It returns when to retry.
func (w *Worker) startContainer(ctx context.Context, c *ctr, now time.Time) time.Time {
	if now.Before(c.restartAt) {
		return c.restartAt
	}
	if !w.admitted {
		if retry, ok := w.admit(ctx, now); !ok {
			return retry
		}
	}
	if c.id != "" && c.rt.State == runtime.StateCreated {
		return w.start(ctx, c, now) // created by an agent that stopped before starting it
	}
	if c.id != "" {
		c.prev = terminatedState(c.rt, w.containerID(c.id))
		w.removeContainer(ctx, c.id)
		c.id, c.rt, c.exitHandled = "", runtime.ContainerStatus{}, false
		c.attempt++
	}
	spec, err := w.containerSpec(ctx, c)
	if err != nil {
		return w.attemptFailed(c, now, ReasonCreateConfigError, err)
	}
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
	id, err := w.cfg.Runtime.Create(rctx, spec)
	cancel()
	if err != nil {
		return w.attemptFailed(c, now, ReasonCreateError, err)
	}
	c.id, c.rt = id, runtime.ContainerStatus{ID: id, Name: c.name, Attempt: c.attempt, State: runtime.StateCreated}
	return w.start(ctx, c, now)
}

// start starts a created container and reads its status.
func (w *Worker) start(ctx context.Context, c *ctr, now time.Time) time.Time {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
	defer cancel()
	startErr := w.cfg.Runtime.Start(rctx, c.id)
	st, err := w.cfg.Runtime.Status(rctx, c.id)
	if startErr != nil && (err != nil || st.State != runtime.StateExited) {
		w.removeContainer(ctx, c.id)
		c.id, c.rt, c.exitHandled = "", runtime.ContainerStatus{}, false
		return w.attemptFailed(c, now, ReasonRunError, startErr)
	}
	if err == nil {
		c.rt = st
	}
	c.waitReason, c.waitMessage = "", ""
	w.cfg.Metrics.ContainerStarts.Inc()
	if c.attempt > 0 {
		w.cfg.Metrics.ContainerRestarts.Inc()
	}
	if startErr != nil {
		w.cfg.Metrics.ContainerFailures.WithLabelValues(ReasonRunError).Inc()
		w.event(corev1.EventTypeWarning, "Failed", "Error: %v", startErr)
	} else {
		w.event(corev1.EventTypeNormal, "Started", "Started container %s", c.name)
	}
	if c.rt.State == runtime.StateExited {
		w.onExit(c, now)
		return c.restartAt
	}
	return time.Time{}
}

// attemptFailed records an attempt that produced no running container and
// schedules the next one after back-off.
func (w *Worker) attemptFailed(c *ctr, now time.Time, reason string, err error) time.Time {
	c.waitReason, c.waitMessage = reason, err.Error()
	c.backoff = nextBackoff(c.backoff, 0, w.cfg.Timing.RestartBackoffInitial, w.cfg.Timing.RestartBackoffMax)
	c.restartAt = now.Add(c.backoff)
	w.cfg.Metrics.ContainerFailures.WithLabelValues(reason).Inc()
	w.event(corev1.EventTypeWarning, "Failed", "Error: %s: %v", reason, err)
	w.log.Warn("container attempt failed", "container", c.name, "attempt", c.attempt, "reason", reason, "err", err)
	return c.restartAt
}

// admit asks the admitters. ok is false while the pod is held (retry is
// when to ask again) or after it was rejected.
func (w *Worker) admit(ctx context.Context, now time.Time) (retry time.Time, ok bool) {
	if len(w.cfg.Hooks.Admitters) > 0 {
		// An admitter may acquire resources even when a later one holds or
		// rejects the pod (a DRA claim prepared, devices allocated): the
		// Releasers must run when the pod ends, whatever the verdict.
		w.holdsResources = true
	}
	for _, a := range w.cfg.Hooks.Admitters {
		actx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
		res := a.Admit(actx, w.pod)
		cancel()
		w.cfg.Metrics.AdmissionDecisions.WithLabelValues(res.Verdict.String()).Inc()
		switch res.Verdict {
		case Admit:
			continue
		case Reject:
			w.event(corev1.EventTypeWarning, res.Reason, "%s", res.Message)
			w.fail(now, res.Reason, res.Message)
			return time.Time{}, false
		default:
			if w.hold == nil || *w.hold != res {
				w.log.Info("pod held", "reason", res.Reason, "message", res.Message)
				w.event(corev1.EventTypeWarning, res.Reason, "%s", res.Message)
			}
			w.hold = &res
			return now.Add(w.cfg.Timing.AdmitRetry), false
		}
	}
	w.admitted, w.hold = true, nil
	return time.Time{}, true
}

// monitor asks the Monitors whether the pod must fail now; the first
// failure fails it.
func (w *Worker) monitor(now time.Time) {
	for _, m := range w.cfg.Hooks.Monitors {
		f := m.PodFailure(w.pod)
		if f == nil {
			continue
		}
		w.log.Warn("pod failed by a monitor", "reason", f.Reason, "message", f.Message)
		w.event(corev1.EventTypeWarning, f.Reason, "%s", f.Message)
		w.fail(now, f.Reason, f.Message)
		w.final.grace = f.Grace
		return
	}
}

// fail finishes the pod as Failed for a reason other than exit codes.
func (w *Worker) fail(now time.Time, reason, message string) {
	w.final = &final{phase: corev1.PodFailed, reason: reason, message: message}
	w.finalAt = now
	w.cp.Phase, w.cp.Reason, w.cp.Message = w.final.phase, reason, message
	w.saveCheckpoint()
}

// decide finishes the pod when its containers' statuses make it
// Succeeded or Failed.
func (w *Worker) decide(now time.Time) {
	if w.final != nil {
		return
	}
	inits, mains := w.containerStatuses(now)
	if p := podPhase(w.pod.Spec.RestartPolicy, inits, mains); p == corev1.PodSucceeded || p == corev1.PodFailed {
		w.final = &final{phase: p}
		w.finalAt = now
		w.cp.Phase = p
		w.saveCheckpoint()
	}
}

// containerSpec builds the runtime spec of c's next attempt.
func (w *Worker) containerSpec(ctx context.Context, c *ctr) (runtime.ContainerSpec, error) {
	spec := w.specOf(c)
	if spec == nil {
		return runtime.ContainerSpec{}, fmt.Errorf("container %s is not in the pod's spec", c.name)
	}
	env, vars, err := containerEnv(w.pod, spec, w.cfg.HostIP, w.cfg.HostIP)
	if err != nil {
		return runtime.ContainerSpec{}, err
	}
	rs := runtime.ContainerSpec{
		PodUID: string(w.pod.UID), PodNamespace: w.pod.Namespace, PodName: w.pod.Name,
		Name: c.name, Attempt: c.attempt, Image: spec.Image,
		Command: expandAll(spec.Command, vars), Args: expandAll(spec.Args, vars),
		Env: env, WorkingDir: spec.WorkingDir,
		Annotations: map[string]string{},
	}
	for k, v := range w.pod.Annotations {
		rs.Annotations[k] = v
	}
	for _, cf := range w.cfg.Hooks.Configurers {
		octx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
		o, err := cf.ContainerOptions(octx, w.pod, spec)
		cancel()
		if err != nil {
			return runtime.ContainerSpec{}, fmt.Errorf("container options: %w", err)
		}
		rs.Env = append(rs.Env, o.Env...)
		rs.Mounts = append(rs.Mounts, o.Mounts...)
		rs.Devices = append(rs.Devices, o.Devices...)
		rs.CDIDevices = append(rs.CDIDevices, o.CDIDevices...)
		for k, v := range o.Annotations {
			rs.Annotations[k] = v
		}
		if o.Fence != nil {
			rs.Fence = o.Fence
		}
	}
	if w.cfg.RootDir != "" {
		rs.LogPath = podfiles.LogPath(w.cfg.RootDir, w.key, c.name, c.attempt)
		if err := os.MkdirAll(filepath.Dir(rs.LogPath), 0o755); err != nil {
			return runtime.ContainerSpec{}, fmt.Errorf("create log directory: %w", err)
		}
	}
	return rs, nil
}

func (w *Worker) specOf(c *ctr) *corev1.Container {
	list := w.pod.Spec.Containers
	if c.init {
		list = w.pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == c.name {
			return &list[i]
		}
	}
	return nil
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
