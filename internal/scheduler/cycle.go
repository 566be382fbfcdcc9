package scheduler

import (
	"context"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/queue"
)

// scheduleOne runs one scheduling cycle. It returns false once the queue
// is closed.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	qp, err := s.queue.Pop()
	if err != nil {
		return false
	}
	pod := qp.Pod
	if pod.Spec.NodeName != "" {
		s.claimCycle(ctx, qp)
		return true
	}
	if s.skip(pod) {
		s.queue.Done(pod.UID)
		return true
	}
	start := s.now()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CycleTimeout)
	defer cancel()
	state := framework.NewCycleState()
	snap, err := s.snapshot()
	if err != nil {
		s.observeAttempt(ResultError, start)
		s.finish(ctx, qp, failure{status: framework.AsStatus(err)})
		return true
	}
	d := s.fw.Schedule(cctx, state, snap, pod)
	if !d.Status.IsSuccess() {
		s.scheduleFailed(ctx, cctx, qp, state, d, start)
		return true
	}
	if e, st, w := s.hold(state, pod, d); st != nil {
		// An extension holds the pod (DRA: control-plane claims wait for
		// their drivers, asked through the pod's PodSchedulingContext):
		// it is parked until they answer or allocate.
		s.observeAttempt(ResultUnschedulable, start)
		s.log.Debug("pod held after its cycle", "pod", d.Pod, "by", e.Name(), "message", st.Message())
		s.finish(ctx, qp, failure{status: st, rejectedBy: []string{e.Name()}, condition: true, write: w})
		return true
	}
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = d.Selected
	if err := s.cache.AssumePod(assumed); err != nil {
		s.observeAttempt(ResultError, start)
		s.finish(ctx, qp, failure{status: framework.AsStatus(err)})
		return true
	}
	if st := s.fw.RunReserve(cctx, state, assumed, d.Selected); !st.IsSuccess() {
		s.forget(assumed)
		s.observeAttempt(resultOf(st), start)
		s.finish(ctx, qp, failure{status: st, rejectedBy: []string{st.Plugin()}, condition: st.Code() != framework.Error})
		return true
	}
	s.observeAttempt(ResultScheduled, start)
	s.log.Debug("assumed pod", "pod", d.Pod, "node", d.Selected, "attempt", qp.Attempts)
	s.goAsync(func() { s.bind(ctx, qp, state, assumed) })
	return true
}

// skip: the pod was deleted or already assumed since it was queued.
func (s *Scheduler) skip(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || s.cache.IsAssumed(pod.UID)
}

func (s *Scheduler) observeAttempt(result string, start time.Time) {
	s.metrics.attempts.WithLabelValues(result).Inc()
	s.metrics.attemptDuration.WithLabelValues(result).Observe(s.now().Sub(start).Seconds())
}

func resultOf(st *framework.Status) string {
	if st.Code() == framework.Error {
		return ResultError
	}
	return ResultUnschedulable
}

// scheduleFailed handles a cycle in which no node was chosen: PostFilter
// plugins may make room; then the pod's condition, an event, and the
// queue.
func (s *Scheduler) scheduleFailed(ctx, cctx context.Context, qp *queue.QueuedPod, state *framework.CycleState, d *framework.Diagnosis, start time.Time) {
	s.observeAttempt(resultOf(d.Status), start)
	f := failure{status: d.Status, message: d.Message(), rejectedBy: d.RejectingPlugins(), condition: true}
	if d.Status.Code() == framework.Wait && qp.Attempts <= 1 && s.waitsQuietly(state) {
		// Its claims' events are on their way: park the pod for them
		// without a condition or an event. Should one never come, the
		// next attempt reports the wait.
		f.condition, f.quiet = false, true
	}
	if d.Status.IsRejected() {
		if pf := s.fw.RunPostFilter(cctx, state, qp.Pod, d); pf.IsSuccess() && pf != nil {
			f.retrySoon = true
		}
		for _, e := range s.exts.rejection {
			if note, w := e.Rejected(state, qp.Pod); w != nil {
				// The write's own events (DRA: deallocationRequested,
				// then the driver's deallocation) move the pod; no
				// backoff retry.
				f.retrySoon = false
				f.message += note
				f.write = w
				break
			}
		}
	}
	if d.Status.Code() == framework.Error {
		s.log.Error("scheduling cycle failed", "pod", d.Pod, "err", d.Status.Err())
	} else {
		s.log.Debug("pod is unschedulable", "pod", d.Pod, "code", d.Status.Code(), "message", f.message)
	}
	s.finish(ctx, qp, f)
}

// failure is why an attempt ended without a binding.
type failure struct {
	status     *framework.Status
	message    string   // for people; default status.Message()
	rejectedBy []string // plugins whose events may help
	condition  bool     // write PodScheduled=False (ResourceClaimsAllocated=False in a claim cycle)
	quiet      bool     // no FailedScheduling event
	retrySoon  bool     // retry after backoff instead of waiting for an event
	claims     bool     // a claim cycle's failure
	// write, when set, is an API write the attempt decided on (a
	// PodSchedulingContext, a deallocation request); it runs before the
	// pod is requeued, and its failure retries the pod with backoff.
	write framework.Write
}

// finish records a failed attempt (condition, event) and requeues the
// pod, on its own goroutine: API writes never stall the loop, and the pod
// stays in flight until they are done so that a later attempt's condition
// cannot be overwritten by this one.
func (s *Scheduler) finish(ctx context.Context, qp *queue.QueuedPod, f failure) {
	if f.message == "" {
		f.message = f.status.Message()
	}
	s.goAsync(func() {
		if f.write != nil {
			if err := f.write(ctx); err != nil {
				s.log.Warn("write for a waiting pod", "pod", qp.Pod.Namespace+"/"+qp.Pod.Name, "err", err)
				f.retrySoon = true
			}
		}
		if f.condition {
			s.recordFailure(ctx, qp.Pod, f)
		}
		event := ReasonFailedScheduling
		if f.claims {
			event = ReasonFailedResourceClaimAllocation
		}
		if !f.quiet {
			s.events.Eventf(qp.Pod, corev1.EventTypeWarning, event, "%s", f.message)
		}
		switch {
		case f.status.Code() == framework.Error || f.retrySoon:
			s.queue.Backoff(qp)
		default:
			s.queue.Unschedulable(qp, f.rejectedBy, f.status.Code() == framework.Wait)
		}
	})
}

// recordFailure writes the failure's condition: PodScheduled=False for a
// pending pod, ResourceClaimsAllocated=False for a claim cycle.
func (s *Scheduler) recordFailure(ctx context.Context, pod *corev1.Pod, f failure) {
	errored := f.status.Code() == framework.Error
	var err error
	switch {
	case f.claims && errored:
		err = s.setClaimsCondition(ctx, pod, corev1.ConditionFalse, ReasonSchedulerError, f.message)
	case f.claims:
		err = s.setClaimsCondition(ctx, pod, corev1.ConditionFalse, ReasonUnallocatable, f.message)
	case errored:
		err = s.setUnscheduled(ctx, pod, ReasonSchedulerError, f.message)
	default:
		err = s.setUnscheduled(ctx, pod, corev1.PodReasonUnschedulable, f.message)
	}
	if err != nil {
		s.log.Warn("update pod condition", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// forget undoes an assume; what the pod held may let parked pods fit.
func (s *Scheduler) forget(assumed *corev1.Pod) {
	s.cache.ForgetPod(assumed)
	s.queue.OnEvent(framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, assumed, nil)
}

// Event and condition reasons.
const (
	// ReasonFailedScheduling is the event of an attempt that did not bind.
	ReasonFailedScheduling = "FailedScheduling"
	// ReasonScheduled is the event of a successful binding.
	ReasonScheduled = "Scheduled"
	// ReasonWaitingForBindingConditions is the Normal event of a pod whose
	// claims are allocated and which waits for its devices' binding
	// conditions before it is bound.
	ReasonWaitingForBindingConditions = "WaitingForBindingConditions"
	// ReasonSchedulerError is the PodScheduled=False (or, in a claim
	// cycle, ResourceClaimsAllocated=False) reason after an error (as
	// opposed to Unschedulable or Unallocatable).
	ReasonSchedulerError = "SchedulerError"

	// ReasonFailedResourceClaimAllocation is the Warning event of a claim
	// cycle that did not allocate and reserve the claims of a pod given a
	// node by hand.
	ReasonFailedResourceClaimAllocation = "FailedResourceClaimAllocation"
	// ReasonAllocatedResourceClaims is the Normal event of a claim cycle's
	// successful binding.
	ReasonAllocatedResourceClaims = "AllocatedResourceClaims"
	// ReasonUnallocatable is the ResourceClaimsAllocated=False reason while
	// the claims cannot be allocated or reserved on the pod's node (or
	// wait for an object to be created).
	ReasonUnallocatable = "Unallocatable"
	// ReasonAllocated is the ResourceClaimsAllocated=True reason once the
	// claims are allocated and reserved for the pod.
	ReasonAllocated = "Allocated"
)
