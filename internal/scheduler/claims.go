package scheduler

import (
	"context"
	"fmt"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/queue"
)

// claimCycle is the assigned-pod cycle: it handles a pod given a node by
// hand that an extension's AssignedPodExtension says needs one
// (needsClaimCycle; for DRA, claims not all allocated and reserved for
// it): the claim framework (NodeName and DynamicResources, no resource
// fit, taints or affinity) runs on the pod's node only, with the pod
// itself taken off the snapshot; the claims are reserved in memory and a
// binding of the pod to the node it is on carries them. A failure is recorded in the pod's
// ResourceClaimsAllocated condition and a FailedResourceClaimAllocation
// event, never in PodScheduled, and the pod is parked or backed off as a
// pending pod would be.
func (s *Scheduler) claimCycle(ctx context.Context, qp *queue.QueuedPod) {
	pod := qp.Pod
	var ext framework.AssignedPodExtension
	if pod.Spec.SchedulerName == s.cfg.SchedulerName && pod.DeletionTimestamp == nil && !framework.IsTerminal(pod) {
		ext = s.assignedExtension(pod)
	}
	if ext == nil {
		s.queue.Done(pod.UID)
		return
	}
	start := s.now()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CycleTimeout)
	defer cancel()
	snap, err := s.snapshot()
	if err != nil {
		s.observeClaimCycle(ResultError)
		s.finish(ctx, qp, failure{status: framework.AsStatus(err), condition: true, claims: true})
		return
	}
	if ext.Ready(pod, snap) {
		s.log.Debug("claims already allocated and reserved", "pod", pod.Namespace+"/"+pod.Name)
		s.goAsync(func() {
			s.markAllocated(ctx, qp)
			s.queue.Done(pod.UID)
		})
		return
	}
	node := pod.Spec.NodeName
	if only, ok := snap.Only(node); ok {
		snap = only
	}
	snap = snap.WithoutPod(pod)
	state := framework.NewCycleState()
	d := s.claimFW.Schedule(cctx, state, snap, pod)
	if !d.Status.IsSuccess() {
		result := resultOf(d.Status)
		s.observeClaimCycle(result)
		if result == ResultError {
			s.log.Error("claim cycle failed", "pod", d.Pod, "err", d.Status.Err())
		} else {
			s.log.Debug("claims cannot be allocated on the pod's node", "pod", d.Pod, "node", node, "message", d.Message())
		}
		s.finish(ctx, qp, failure{status: d.Status, message: d.Message(), rejectedBy: d.RejectingPlugins(), condition: true, claims: true})
		return
	}
	if st := ext.HoldAssigned(state, pod, d); st != nil {
		// DRA: the claim controller asks the drivers through a
		// PodSchedulingContext with only selectedNode; the scheduler waits
		// for their allocation and then reserves the rest.
		s.observeClaimCycle(ResultUnschedulable)
		s.finish(ctx, qp, failure{status: st, rejectedBy: []string{ext.Name()}, condition: true, claims: true})
		return
	}
	if st := s.claimFW.RunReserve(cctx, state, pod, node); !st.IsSuccess() {
		s.observeClaimCycle(resultOf(st))
		s.finish(ctx, qp, failure{status: st, rejectedBy: []string{st.Plugin()}, condition: st.Code() != framework.Error, claims: true})
		return
	}
	s.observeClaimCycle(ResultAllocated)
	s.log.Debug("reserved claims of a pod on its node", "pod", d.Pod, "node", node, "attempt", qp.Attempts,
		"duration", s.now().Sub(start))
	s.goAsync(func() { s.bindClaims(ctx, qp, ext, state, pod) })
}

func (s *Scheduler) observeClaimCycle(result string) {
	s.metrics.claimCycles.WithLabelValues(result).Inc()
}

// bindClaims runs on the pod's own goroutine: the Binding of the pod to
// the node it is already on carries its claims (allocations, reservedFor
// and fences), as a pending pod's binding would. On failure the
// reservation is undone and the pod requeued.
func (s *Scheduler) bindClaims(ctx context.Context, qp *queue.QueuedPod, ext framework.AssignedPodExtension, state *framework.CycleState, pod *corev1.Pod) {
	start := s.now()
	node := pod.Spec.NodeName
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BindTimeout)
	defer cancel()
	st, contributed := s.commit(bctx, s.claimFW, state, pod, node, false)
	s.observeBind(st, start)
	if st.IsSuccess() {
		s.events.Eventf(pod, corev1.EventTypeNormal, ReasonAllocatedResourceClaims, "%s", ext.BoundMessage(state, node))
		s.log.Debug("bound claims", "pod", pod.Namespace+"/"+pod.Name, "node", node)
		s.markAllocated(ctx, qp)
		s.queue.Done(pod.UID)
		return
	}
	s.log.Info("claim binding failed", "pod", pod.Namespace+"/"+pod.Name, "node", node, "status", st)
	s.unreserve(ctx, s.claimFW, state, pod, node)
	f := bindFailure(st, contributed)
	f.claims = true
	s.finish(ctx, qp, f)
}

// markAllocated sets ResourceClaimsAllocated=True once the pod's claims
// are allocated and reserved, if an earlier attempt may have set it False:
// the pod's copy says False, or this is not its first attempt (the copy
// may predate that attempt's write). A pod whose first attempt succeeded
// gets no condition: nothing was ever wrong.
func (s *Scheduler) markAllocated(ctx context.Context, qp *queue.QueuedPod) {
	pod := qp.Pod
	if c := ClaimsAllocatedCondition(pod); qp.Attempts <= 1 && (c == nil || c.Status != corev1.ConditionFalse) {
		return
	}
	msg := fmt.Sprintf("resource claims are allocated and reserved for the pod on node %s", pod.Spec.NodeName)
	if err := s.setClaimsCondition(ctx, pod, corev1.ConditionTrue, ReasonAllocated, msg); err != nil {
		s.log.Warn("update pod condition", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}
