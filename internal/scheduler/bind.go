package scheduler

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	st, contributed, release := s.preBind(ctx, state, assumed, node)
	if st.IsSuccess() {
		bctx, cancel := context.WithTimeout(ctx, s.cfg.BindTimeout)
		st, contributed = s.commit(bctx, s.fw, state, assumed, node, false)
		cancel()
	}
	s.observeBind(st, start)
	if st.IsSuccess() {
		s.metrics.podDuration.Observe(s.now().Sub(qp.InitialTimestamp).Seconds())
		s.events.Eventf(assumed, corev1.EventTypeNormal, ReasonScheduled, "Successfully assigned %s/%s to %s", assumed.Namespace, assumed.Name, node)
		s.log.Debug("bound pod", "pod", assumed.Namespace+"/"+assumed.Name, "node", node)
		s.bound(ctx, assumed)
		s.queue.Done(assumed.UID)
		return
	}
	s.log.Info("binding failed", "pod", assumed.Namespace+"/"+assumed.Name, "node", node, "status", st)
	if release != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.BindTimeout)
		release.Release(rctx, state, assumed)
		cancel()
	}
	s.unreserve(ctx, s.fw, state, assumed, node)
	s.forget(assumed)
	s.bindFailed(assumed)
	s.finish(ctx, qp, bindFailure(st, contributed))
}

// preBind is the first half of a two-step binding, when an extension asks
// for one (devices with binding conditions): the claims are committed
// without the pod (Binding.ClaimsOnly), and the extension waits, up to
// BindingConditionsTimeout, until the pod may be bound. release is the
// extension that must undo the first step if the binding fails from then
// on (nil when there was none, or it was not posted).
func (s *Scheduler) preBind(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, node string) (st *framework.Status, contributed bool, release framework.PreBindExtension) {
	var ext framework.PreBindExtension
	var waits string
	for _, e := range s.exts.preBind {
		if waits = e.TwoStep(state, pod); waits != "" {
			ext = e
			break
		}
	}
	if ext == nil {
		return nil, false, nil
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BindTimeout)
	st, contributed = s.commit(bctx, s.fw, state, pod, node, true)
	cancel()
	if contributed {
		release = ext // a failed POST may have committed all the same
	}
	if !st.IsSuccess() {
		return st, contributed, release
	}
	ext.Committed(state)
	s.events.Eventf(pod, corev1.EventTypeNormal, ReasonWaitingForBindingConditions, "Allocated the claims on %s; %s", node, waits)
	s.log.Info("waiting for binding conditions", "pod", pod.Namespace+"/"+pod.Name, "node", node, "waits", waits)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.BindingConditionsTimeout)
	defer cancel()
	st = ext.PreBind(wctx, state, pod, func() bool { return !s.cache.HasNode(node) })
	return st, false, release
}

// commit lets fw's bind contributors fill the Binding of pod to node and
// posts it; contributed reports whether the POST was made. After a
// successful POST the PostBind plugins learn the binding's revision.
// claimsOnly commits the claims without binding the pod.
func (s *Scheduler) commit(ctx context.Context, fw *framework.Framework, state *framework.CycleState, pod *corev1.Pod, node string, claimsOnly bool) (st *framework.Status, contributed bool) {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		ClaimsOnly: claimsOnly,
	}
	if st := fw.RunBindContributors(ctx, state, pod, node, b); !st.IsSuccess() {
		return st, false
	}
	made, st := s.createBindClaims(ctx, fw, state, pod, b)
	if !st.IsSuccess() {
		return st, false
	}
	rev, err := s.binder.Bind(ctx, pod.Namespace, pod.Name, b)
	if err != nil {
		if bindRefused(err) {
			s.deleteBindClaims(ctx, made)
		}
		return framework.AsStatus(err).WithPlugin("Bind"), true
	}
	s.metrics.observeBinding(b)
	fw.RunPostBind(ctx, state, pod, node, rev)
	return nil, true
}

// bindRefused reports whether the API server answered a binding with a
// refusal, so that it was not committed; after a lost answer the binding
// may have been, and the claim it allocated is left to its owner, the
// pod.
func bindRefused(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsGone(err)
}

func (s *Scheduler) observeBind(st *framework.Status, start time.Time) {
	result := "success"
	if !st.IsSuccess() {
		result = "error"
	}
	s.metrics.bindDuration.WithLabelValues(result).Observe(s.now().Sub(start).Seconds())
}

// unreserve undoes fw's reservations; it runs even when the bind deadline
// has passed.
func (s *Scheduler) unreserve(ctx context.Context, fw *framework.Framework, state *framework.CycleState, pod *corev1.Pod, node string) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.BindTimeout)
	defer cancel()
	fw.RunUnreserve(uctx, state, pod, node)
}

// bindFailure is the failure of a binding step whose status is st.
func bindFailure(st *framework.Status, contributed bool) failure {
	f := failure{status: st, rejectedBy: []string{st.Plugin()}}
	if contributed {
		// The API server refused or the write failed: the pod may have been
		// bound or deleted meanwhile, so its condition is left alone.
		f.message = "binding rejected: " + st.Message()
		f.status = framework.AsStatus(st.Err())
	} else {
		f.condition = st.Code() != framework.Error
	}
	return f
}
