package scheduler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/queue"
)

// bind runs on the pod's own goroutine: bind contributors fill the
// Binding, which is then posted once. On failure the reservation and the
// assumed pod are undone and the pod requeued.
func (s *Scheduler) bind(ctx context.Context, qp *queue.QueuedPod, state *framework.CycleState, assumed *corev1.Pod) {
	start := s.now()
	node := assumed.Spec.NodeName
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BindTimeout)
	defer cancel()
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: assumed.Name, Namespace: assumed.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	st := s.fw.RunBindContributors(bctx, state, assumed, node, b)
	contributed := st.IsSuccess()
	if contributed {
		rev, err := s.binder.Bind(bctx, assumed.Namespace, assumed.Name, b)
		if err != nil {
			st = framework.AsStatus(err).WithPlugin("Bind")
		} else {
			s.fw.RunPostBind(bctx, state, assumed, node, rev)
		}
	}
	result := "success"
	if !st.IsSuccess() {
		result = "error"
	}
	s.metrics.bindDuration.WithLabelValues(result).Observe(s.now().Sub(start).Seconds())
	if st.IsSuccess() {
		s.metrics.podDuration.Observe(s.now().Sub(qp.InitialTimestamp).Seconds())
		s.events.Eventf(assumed, corev1.EventTypeNormal, ReasonScheduled, "Successfully assigned %s/%s to %s", assumed.Namespace, assumed.Name, node)
		s.log.Debug("bound pod", "pod", assumed.Namespace+"/"+assumed.Name, "node", node)
		s.queue.Done(assumed.UID)
		return
	}
	s.log.Info("binding failed", "pod", assumed.Namespace+"/"+assumed.Name, "node", node, "status", st)
	// Unreserve must run even when the bind deadline has passed.
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.BindTimeout)
	defer ucancel()
	s.fw.RunUnreserve(uctx, state, assumed, node)
	s.forget(assumed)
	f := failure{status: st, rejectedBy: []string{st.Plugin()}}
	if contributed {
		// The API server refused or the write failed: the pod may have been
		// bound or deleted meanwhile, so its condition is left alone.
		f.message = "binding rejected: " + st.Message()
		f.status = framework.AsStatus(st.Err())
	} else {
		f.condition = st.Code() != framework.Error
	}
	s.finish(ctx, qp, f)
}
