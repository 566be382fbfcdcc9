package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// ReasonUnprepared is the reason of the pod condition
// ResourceClaimsUnprepared that Release sets.
const ReasonUnprepared = "ResourceClaimsUnprepared"

// maxConditionAttempts bounds the conflict retries of one condition write.
const maxConditionAttempts = 3

// Release unprepares the claims pod was the last user of on this node
// (batched per driver; a claim other pods still use stays prepared), then
// sets the pod condition ResourceClaimsUnprepared=True, so the claim
// controller may drop the pod from the claims' reservedFor. A failure
// (including a driver that is not registered) is an error, retried by the
// caller; the Manager spaces the attempts with exponential back-off.
// Release is idempotent: a pod it knows nothing of has nothing to
// unprepare.
func (m *Manager) Release(ctx context.Context, pod *corev1.Pod) error {
	if err := m.releasePod(ctx, podKey{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}); err != nil {
		return err
	}
	m.pods.forget(pod.UID)
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	return m.markUnprepared(ctx, pod.Namespace, pod.Name, pod.UID)
}

// releasePod detaches a pod from its claims and unprepares those it was
// the last user of.
func (m *Manager) releasePod(ctx context.Context, pod podKey) error {
	podUID := pod.UID
	now := time.Now()
	var wait error
	m.pods.with(podUID, func(st *podState) {
		if now.Before(st.relRetryAt) {
			wait = fmt.Errorf("unprepare resource claims: back-off until %s after: %w", st.relRetryAt.Format(retryTimeFormat), st.relErr)
		}
	})
	if wait != nil {
		return wait
	}
	uids := m.store.podClaims(podUID)
	if len(uids) == 0 {
		return nil
	}
	unlock := m.locks.lock(uids)
	defer unlock()
	last, changed := m.store.detach(podUID, uids)
	if changed {
		if err := m.saveStore(); err != nil {
			return m.unprepareFailed(podUID, time.Now(), []string{err.Error()}, nil)
		}
	}
	done, failures, missing := m.callUnprepares(ctx, last)
	if len(done) > 0 {
		m.store.remove(done)
		if err := m.saveStore(); err != nil {
			failures = append(failures, err.Error())
		}
		m.log.Info("DRA claims unprepared", "pod", pod.Namespace+"/"+pod.Name, "uid", string(podUID), "claims", len(done))
	}
	if len(failures) > 0 {
		return m.unprepareFailed(podUID, time.Now(), failures, missing)
	}
	return nil
}

// callUnprepares calls each driver once with the claims' handles. It
// returns the claims every driver unprepared, the failures, and the
// drivers that were not registered.
func (m *Manager) callUnprepares(ctx context.Context, recs []claimRecord) (done []types.UID, failures, missing []string) {
	batches := map[string][]batchItem{}
	for _, rec := range recs {
		for _, h := range rec.Handles {
			batches[h.Driver] = append(batches[h.Driver], batchItem{uid: rec.UID, namespace: rec.Namespace, name: rec.Name, h: h})
		}
	}
	ok := map[types.UID]map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(batches)) {
		items := batches[name]
		d := m.drivers.get(name)
		if d == nil {
			failures = append(failures, fmt.Sprintf("driver %s is not registered", name))
			missing = append(missing, name)
			continue
		}
		resp, err := m.callUnprepare(ctx, d, items)
		if err != nil && status.Code(err) != codes.NotFound {
			failures = append(failures, fmt.Sprintf("driver %s: %v", name, err))
			continue
		}
		failed := false
		for _, it := range items {
			key := it.namespace + "/" + it.name
			if err == nil { // NOT_FOUND for the whole call: nothing is prepared
				r := resp.GetClaims()[string(it.uid)]
				switch {
				case r == nil:
					failures = append(failures, fmt.Sprintf("driver %s gave no result for claim %s", name, key))
					failed = true
					continue
				case r.GetError() != "":
					failures = append(failures, fmt.Sprintf("driver %s: claim %s: %s", name, key, r.GetError()))
					failed = true
					continue
				}
			}
			if ok[it.uid] == nil {
				ok[it.uid] = map[string]bool{}
			}
			ok[it.uid][name] = true
		}
		if failed {
			m.metrics.errors.WithLabelValues(name, opUnprepare).Inc()
		}
	}
	for _, rec := range recs {
		if len(ok[rec.UID]) == len(rec.Handles) {
			done = append(done, rec.UID)
		}
	}
	return done, failures, missing
}

// callUnprepare is one NodeUnprepareResources call, with its deadline.
func (m *Manager) callUnprepare(ctx context.Context, d *driver, items []batchItem) (*drapb.NodeUnprepareResourcesResponse, error) {
	req := &drapb.NodeUnprepareResourcesRequest{}
	for _, it := range items {
		req.Claims = append(req.Claims, it.proto())
	}
	cctx, cancel := d.callContext(ctx, m.opts.PrepareTimeout)
	defer cancel()
	start := time.Now()
	resp, err := d.client.NodeUnprepareResources(cctx, req)
	m.metrics.observe(d.name, opUnprepare, start, err)
	return resp, err
}

// unprepareFailed starts or extends the pod's unprepare back-off.
func (m *Manager) unprepareFailed(podUID types.UID, now time.Time, failures, missing []string) error {
	err := errors.New(strings.Join(failures, "; "))
	var retryAt time.Time
	m.pods.with(podUID, func(st *podState) {
		st.relFailures++
		st.relRetryAt = now.Add(m.backoff(st.relFailures))
		st.relErr = err
		st.waitDrivers = setOf(missing)
		retryAt = st.relRetryAt
	})
	return fmt.Errorf("unprepare resource claims (next attempt at %s): %w", retryAt.Format(retryTimeFormat), err)
}

// markUnprepared sets the pod condition ResourceClaimsUnprepared=True,
// keeping the other conditions. A pod that is gone (or whose name now
// belongs to another pod) needs none.
func (m *Manager) markUnprepared(ctx context.Context, ns, name string, uid types.UID) error {
	pc := m.opts.Client.Pods(ns)
	for range maxConditionAttempts {
		actx, cancel := m.apiContext(ctx)
		pod, err := pc.Get(actx, name)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("read pod %s/%s: %w", ns, name, err)
		case pod.UID != uid || hasUnprepared(pod):
			return nil
		}
		setUnprepared(pod, m.opts.NodeName)
		actx, cancel = m.apiContext(ctx)
		_, err = pc.UpdateStatus(actx, pod)
		cancel()
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("set condition %s of pod %s/%s: %w", corev1.PodResourceClaimsUnprepared, ns, name, err)
		}
	}
	return fmt.Errorf("set condition %s of pod %s/%s: conflicting writes", corev1.PodResourceClaimsUnprepared, ns, name)
}

func hasUnprepared(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResourceClaimsUnprepared {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setUnprepared(pod *corev1.Pod, node string) {
	c := corev1.PodCondition{
		Type: corev1.PodResourceClaimsUnprepared, Status: corev1.ConditionTrue, Reason: ReasonUnprepared,
		Message:            "the node agent of " + node + " unprepared the pod's resource claims",
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
