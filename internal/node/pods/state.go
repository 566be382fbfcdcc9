package pods

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

// state is a worker's memory of its pod; only the worker's goroutine
// touches it.
type state struct {
	pod      *corev1.Pod
	key      podfiles.PodKey
	existing []runtime.ContainerStatus // adopted at setup, then nil
	setUp    bool

	inits, mains []*ctr
	cp           podfiles.Checkpoint

	admitted bool
	// holdsResources: the pod may hold resources from the admitters (they
	// were asked to admit it, or it ran before this worker started), so
	// Releasers run.
	holdsResources bool
	hold           *Admission
	final          *final
	finalAt        time.Time
	released       bool // Releasers were called
	cleaned        bool // containers of the finished pod were removed

	gone     bool // the pod left the API
	deleting bool // deletionTimestamp seen, or gone: no more starts
	finished bool // deletion complete; Run returns

	startTime      time.Time
	firstSeen      time.Time
	reportedStart  bool
	countedRunning bool
}

// final is why a pod finished, when that is not only its containers' exit
// codes.
type final struct {
	phase   corev1.PodPhase
	reason  string
	message string
	// fromAPI: the pod had finished before this worker started; its
	// status in the API is left as it is.
	fromAPI bool
	// grace caps the grace period of the containers' stop (a Monitor's
	// Failure.Grace); nil: none.
	grace *time.Duration
}

// ctr is a worker's memory of one container of its pod.
type ctr struct {
	name string
	init bool
	// attempt is the attempt of id, or of the next container to create
	// when id is empty; it is also the restart count.
	attempt int
	id      string
	rt      runtime.ContainerStatus // last observed status of id
	// exitHandled: rt's exit was acted on (restart planned or done set).
	exitHandled bool
	// prev is the end of the attempt before the current one.
	prev *corev1.ContainerStateTerminated
	// done is the end of the last attempt: the container never runs again.
	done *corev1.ContainerStateTerminated
	// restartAt is when the next attempt may start (back-off).
	restartAt time.Time
	backoff   time.Duration
	// waitReason and waitMessage say why no container exists now.
	waitReason, waitMessage string
}

func (c *ctr) active() bool {
	return c.id != "" && (c.rt.State == runtime.StateRunning || c.rt.State == runtime.StateCreated || c.rt.State == runtime.StateUnknown)
}

func (w *Worker) all() []*ctr { return append(slices.Clone(w.inits), w.mains...) }

func (w *Worker) byName(name string) *ctr {
	for _, c := range w.all() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (w *Worker) containerID(id string) string {
	if id == "" {
		return ""
	}
	return w.cfg.Runtime.Name() + "://" + id
}

// setup builds the worker's memory of its pod from the spec, the
// checkpoint, the API status and the runtime's existing containers.
func (w *Worker) setup(ctx context.Context, now time.Time) {
	w.setUp = true
	w.firstSeen = now
	for _, c := range w.pod.Spec.InitContainers {
		w.inits = append(w.inits, &ctr{name: c.Name, init: true})
	}
	for _, c := range w.pod.Spec.Containers {
		w.mains = append(w.mains, &ctr{name: c.Name})
	}
	if st := w.pod.Status.StartTime; st != nil {
		w.startTime = st.Time
	}
	w.cp = podfiles.Checkpoint{}
	if w.cfg.RootDir != "" {
		cp, err := podfiles.LoadCheckpoint(w.cfg.RootDir, w.key)
		if err != nil {
			w.log.Warn("ignore unreadable checkpoint", "err", err)
		} else {
			w.cp = cp
		}
	}
	for name, f := range w.cp.Done {
		if c := w.byName(name); c != nil {
			c.attempt = f.Attempt
			c.done = finishedState(f)
		}
	}
	switch p := w.pod.Status.Phase; {
	case p == corev1.PodSucceeded || p == corev1.PodFailed:
		w.final = &final{phase: p, reason: w.pod.Status.Reason, message: w.pod.Status.Message, fromAPI: true}
	case w.cp.Phase != "":
		w.final = &final{phase: w.cp.Phase, reason: w.cp.Reason, message: w.cp.Message}
	}
	if w.final != nil {
		w.finalAt = now
	}
	w.adopt(ctx)
}

// adopt takes over the runtime's containers of the pod: per container the
// highest attempt is current, older attempts are removed after their end
// is kept as the previous termination. Containers the spec does not name
// are removed.
func (w *Worker) adopt(ctx context.Context) {
	newest := map[string]runtime.ContainerStatus{}
	for _, st := range w.existing {
		if cur, ok := newest[st.Name]; !ok || st.Attempt > cur.Attempt {
			newest[st.Name] = st
		}
	}
	var remove []string
	for _, st := range w.existing {
		c := w.byName(st.Name)
		switch {
		case c == nil || (c.done != nil && st.Attempt < c.attempt):
			remove = append(remove, st.ID)
		case st.ID != newest[st.Name].ID:
			if n := newest[st.Name]; st.State == runtime.StateExited && st.Attempt == n.Attempt-1 {
				c.prev = terminatedState(st, w.containerID(st.ID))
			}
			remove = append(remove, st.ID)
		default:
			c.id, c.attempt, c.rt = st.ID, st.Attempt, st
			c.exitHandled = c.done != nil
			w.log.Info("adopted container", "container", st.Name, "attempt", st.Attempt, "state", st.State)
		}
	}
	w.existing = nil
	for _, c := range w.all() {
		if c.id != "" || c.done != nil {
			w.holdsResources = true
		}
	}
	for _, id := range remove {
		w.removeContainer(ctx, id)
	}
}

// finishedState converts a checkpoint record.
func finishedState(f podfiles.Finished) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode: f.ExitCode, Signal: f.Signal, Reason: f.Reason, Message: f.Message,
		StartedAt: apiTime(f.StartedAt), FinishedAt: apiTime(f.FinishedAt),
	}
}

// refresh reads the status of every container that may still change, and
// acts on exits once.
func (w *Worker) refresh(ctx context.Context, now time.Time) {
	for _, c := range w.all() {
		if c.id == "" || (c.rt.State == runtime.StateExited && c.exitHandled) {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
		st, err := w.cfg.Runtime.Status(rctx, c.id)
		cancel()
		switch {
		case errors.Is(err, runtime.ErrNotFound):
			st = c.rt
			st.State, st.ExitCode, st.Reason, st.Message = runtime.StateExited, exitCodeContainerVanished, ReasonStatusUnknown, messageContainerVanished
			if st.FinishedAt.IsZero() {
				st.FinishedAt = now
			}
		case err != nil:
			if ctx.Err() == nil {
				w.log.Warn("read container status", "container", c.name, "err", err)
			}
			continue
		}
		c.rt = st
		if st.State == runtime.StateExited && !c.exitHandled {
			w.onExit(c, now)
		}
	}
}

// onExit decides, once per attempt, what follows a container's exit: done
// for good, or a restart after back-off.
func (w *Worker) onExit(c *ctr, now time.Time) {
	c.exitHandled = true
	term := terminatedState(c.rt, w.containerID(c.id))
	if w.deleting || w.final != nil || !w.shouldRestart(c, term.ExitCode) {
		c.done = term
		w.recordDone(c)
		return
	}
	ran := c.rt.FinishedAt.Sub(c.rt.StartedAt)
	c.backoff = nextBackoff(c.backoff, ran, w.cfg.Timing.RestartBackoffInitial, w.cfg.Timing.RestartBackoffMax)
	c.restartAt = now.Add(c.backoff)
	w.event(corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.name, w.pod.Name)
}

// shouldRestart applies the restart policy to an exit: an init container
// that succeeded is done; one that failed runs again unless the policy is
// Never.
func (w *Worker) shouldRestart(c *ctr, exitCode int32) bool {
	policy := w.pod.Spec.RestartPolicy
	if c.init {
		return exitCode != 0 && policy != corev1.RestartPolicyNever
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// recordDone checkpoints a container that will not run again.
func (w *Worker) recordDone(c *ctr) {
	if w.cfg.RootDir == "" || w.deleting {
		return
	}
	if w.cp.Done == nil {
		w.cp.Done = map[string]podfiles.Finished{}
	}
	w.cp.Done[c.name] = podfiles.Finished{
		Attempt: c.attempt, ExitCode: c.done.ExitCode, Signal: c.done.Signal, Reason: c.done.Reason,
		Message: c.done.Message, StartedAt: c.done.StartedAt.Time, FinishedAt: c.done.FinishedAt.Time,
	}
	w.saveCheckpoint()
}

func (w *Worker) saveCheckpoint() {
	if w.cfg.RootDir == "" {
		return
	}
	if err := podfiles.SaveCheckpoint(w.cfg.RootDir, w.key, w.cp); err != nil {
		w.log.Error("save checkpoint", "err", err)
	}
}

// removeContainer removes one container, logging failures: a leftover is
// found again by the next agent's adoption.
func (w *Worker) removeContainer(ctx context.Context, id string) bool {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timing.RuntimeTimeout)
	defer cancel()
	if err := w.cfg.Runtime.Remove(rctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		w.log.Warn("remove container", "id", id, "err", err)
		return false
	}
	return true
}
