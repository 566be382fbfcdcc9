package pods

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/pkg/client"
)

// maxStatusAttempts bounds the conflict retries of one status write.
const maxStatusAttempts = 3

// containerStatus is the API status of one container.
func (w *Worker) containerStatus(c *ctr, now time.Time, initDone bool) corev1.ContainerStatus {
	spec := w.specOf(c)
	s := corev1.ContainerStatus{Name: c.name, RestartCount: int32(c.attempt)}
	if spec != nil {
		s.Image, s.ImageID = spec.Image, spec.Image
	}
	if c.prev != nil {
		s.LastTerminationState.Terminated = c.prev
	}
	started := false
	switch {
	case c.done != nil:
		s.State.Terminated = c.done
		s.ContainerID = c.done.ContainerID
	case c.id != "" && c.rt.State == runtime.StateRunning:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: apiTime(c.rt.StartedAt)}
		s.Ready, started = true, true
	case c.id != "" && c.rt.State == runtime.StateExited:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff, Message: crashLoopMessage(c.backoff, c.name, w.pod)}
		s.LastTerminationState.Terminated = terminatedState(c.rt, w.containerID(c.id))
	case c.waitReason != "":
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: c.waitReason, Message: c.waitMessage}
	case w.hold != nil:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.hold.Reason, Message: w.hold.Message}
	case !c.init && !initDone:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonPodInitializing}
	default:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}
	}
	if c.id != "" && s.ContainerID == "" {
		s.ContainerID = w.containerID(c.id)
	}
	if !c.init {
		s.Started = &started
	}
	if !c.init {
		for _, h := range w.cfg.Hooks.HealthReporters {
			s.AllocatedResourcesStatus = append(s.AllocatedResourcesStatus, h.AllocatedResourcesStatus(w.pod, c.name)...)
		}
	}
	return s
}

// containerStatuses returns the statuses of the init containers and the
// containers, in spec order.
func (w *Worker) containerStatuses(now time.Time) (inits, mains []corev1.ContainerStatus) {
	initDone := true
	for _, c := range w.inits {
		if c.done == nil || c.done.ExitCode != 0 {
			initDone = false
		}
		inits = append(inits, w.containerStatus(c, now, true))
	}
	for _, c := range w.mains {
		mains = append(mains, w.containerStatus(c, now, initDone))
	}
	return inits, mains
}

// podStatus computes the pod's status from base (the API's), keeping the
// fields the agent does not own.
func (w *Worker) podStatus(base *corev1.PodStatus, now time.Time) corev1.PodStatus {
	st := *base.DeepCopy()
	inits, mains := w.containerStatuses(now)
	st.InitContainerStatuses, st.ContainerStatuses = inits, mains
	st.Phase, st.Reason, st.Message = podPhase(w.pod.Spec.RestartPolicy, inits, mains), "", ""
	if f := w.final; f != nil {
		st.Phase, st.Reason, st.Message = f.phase, f.reason, f.message
	}
	if w.cfg.HostIP != "" {
		st.HostIP, st.PodIP = w.cfg.HostIP, w.cfg.HostIP
	}
	if st.StartTime == nil && !w.startTime.IsZero() {
		t := apiTime(w.startTime)
		st.StartTime = &t
	}
	st.Conditions = mergeConditions(st.Conditions, podConditions(st.Phase, inits, mains), now)
	return st
}

// report updates metrics and writes the pod's status when it changed. It
// returns true when the write failed and should be retried.
func (w *Worker) report(ctx context.Context, now time.Time) (retry bool) {
	if w.final != nil && w.final.fromAPI {
		w.setRunningMetric(false)
		return false
	}
	st := w.podStatus(&w.pod.Status, now)
	running := st.Phase == corev1.PodRunning
	w.setRunningMetric(running)
	if running && !w.reportedStart {
		w.reportedStart = true
		w.cfg.Metrics.PodStartDuration.Observe(now.Sub(w.firstSeen).Seconds())
	}
	if !w.cfg.StatusUpdates {
		return false
	}
	for range maxStatusAttempts {
		if equality.Semantic.DeepEqual(st, w.pod.Status) {
			return false
		}
		p := w.pod.DeepCopy()
		p.Status = st
		actx, cancel := context.WithTimeout(ctx, w.cfg.Timing.APITimeout)
		out, err := w.cfg.API.UpdatePodStatus(actx, p)
		cancel()
		switch {
		case err == nil:
			w.cfg.Metrics.StatusUpdates.WithLabelValues("ok").Inc()
			w.setPod(out)
			return false
		case apierrors.IsNotFound(err):
			return false // gone: the informer will say so
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// Retrying the same status cannot help; the next change may.
			w.cfg.Metrics.StatusUpdates.WithLabelValues("error").Inc()
			w.log.Error("pod status rejected", "err", err)
			return false
		case client.IsInsufficientStorage(err):
			// The API server's storage is full; the client logged it once.
			w.cfg.Metrics.StatusUpdates.WithLabelValues("error").Inc()
			w.log.Debug("update pod status", "err", err)
			return true
		case !apierrors.IsConflict(err):
			w.cfg.Metrics.StatusUpdates.WithLabelValues("error").Inc()
			w.log.Warn("update pod status", "err", err)
			return true
		}
		w.cfg.Metrics.StatusUpdates.WithLabelValues("conflict").Inc()
		actx, cancel = context.WithTimeout(ctx, w.cfg.Timing.APITimeout)
		fresh, err := w.cfg.API.GetPod(actx, w.pod.Namespace, w.pod.Name)
		cancel()
		if err != nil || fresh.UID != w.uid {
			return err != nil && !apierrors.IsNotFound(err)
		}
		w.pod = fresh
		st = w.podStatus(&w.pod.Status, now)
	}
	return true
}

// publish stores a snapshot of the containers for the log server.
func (w *Worker) publish() {
	s := &Snapshot{Key: w.key, Containers: make(map[string]ContainerSnapshot, len(w.inits)+len(w.mains))}
	for _, c := range w.all() {
		s.Containers[c.name] = ContainerSnapshot{Attempt: c.attempt, Running: c.active()}
	}
	w.snap.Store(s)
}
