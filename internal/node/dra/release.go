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
	"allot.dev/allot/internal/node/pods"
)

// Reasons of the pod condition ResourceClaimsUnprepared that Release sets,
// and of its events.
const (
	// ReasonUnprepared: True, every claim is unprepared.
	ReasonUnprepared = "ResourceClaimsUnprepared"
	// ReasonWaitingForDriver: False, a claim's driver is not registered
	// on the node, so its claims cannot be unprepared; the pod's deletion
	// waits for it.
	ReasonWaitingForDriver = "WaitingForDRADriver"
	// ReasonUnprepareFailed: False, a driver failed to unprepare.
	ReasonUnprepareFailed = "UnprepareFailed"
)

// UnprepareError is Release's error: what failed, the drivers that are
// not registered with the claims they hold, and when the next attempt is
// due (pods.RetryAfter).
type UnprepareError struct {
	Failures []string
	// Missing maps each unregistered driver to its claims (NAMESPACE/NAME).
	Missing map[string][]string
	At      time.Time
	// Waiting is set when Release made no attempt (back-off).
	Waiting bool
}

func (e *UnprepareError) Error() string {
	msg := strings.Join(e.Failures, "; ")
	if e.Waiting {
		return fmt.Sprintf("unprepare resource claims: back-off until %s after: %s", e.At.Format(retryTimeFormat), msg)
	}
	return fmt.Sprintf("unprepare resource claims (next attempt at %s): %s", e.At.Format(retryTimeFormat), msg)
}

// RetryAt is when the next attempt is due.
func (e *UnprepareError) RetryAt() time.Time { return e.At }

// BackingOff reports that no attempt was made.
func (e *UnprepareError) BackingOff() bool { return e.Waiting }

var _ pods.RetryAfter = (*UnprepareError)(nil)

// reason and message of the pod's ResourceClaimsUnprepared=False condition
// and event: what the deletion waits for, and what the user can do.
func (e *UnprepareError) reasonMessage(pod *corev1.Pod, node string) (string, string) {
	if len(e.Missing) > 0 {
		var parts []string
		for _, d := range slices.Sorted(maps.Keys(e.Missing)) {
			parts = append(parts, fmt.Sprintf("DRA driver %s to unprepare claim %s", d, strings.Join(e.Missing[d], ", ")))
		}
		return ReasonWaitingForDriver, fmt.Sprintf("waiting for %s: the driver is not registered on node %s. "+
			"Start the driver there, or force the deletion (allot delete pod %s -n %s --force), which leaves the claim prepared on the node",
			strings.Join(parts, "; "), node, pod.Name, pod.Namespace)
	}
	// No retry time in the text: the condition is rewritten, and the
	// event counted again rather than recorded anew, only when what
	// failed changes.
	return ReasonUnprepareFailed, "unprepare of the pod's resource claims failed (retried with back-off): " +
		strings.Join(e.Failures, "; ")
}

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
		var ue *UnprepareError
		if errors.As(err, &ue) && !ue.Waiting {
			m.reportBlocked(ctx, pod, ue)
		}
		return err
	}
	m.pods.forget(pod.UID)
	if !pod.UsesResourceClaims() {
		return nil
	}
	return m.markUnprepared(ctx, pod.Namespace, pod.Name, pod.UID)
}

// releasePod detaches a pod from its claims and unprepares those it was
// the last user of.
func (m *Manager) releasePod(ctx context.Context, pod podKey) error {
	podUID := pod.UID
	now := time.Now()
	var wait *UnprepareError
	m.pods.with(podUID, func(st *podState) {
		if now.Before(st.relRetryAt) && st.relErr != nil {
			w := *st.relErr
			w.Waiting = true
			wait = &w
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
	if changed || len(done) > 0 {
		defer m.published.later()
	}
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

// callUnprepares calls each driver once with the claims' handles (a
// kubelet driver with their references, whatever API the driver spoke
// when it prepared them: it keeps its own record of what it did). It
// returns the claims every driver unprepared, the failures, and the
// drivers that were not registered.
func (m *Manager) callUnprepares(ctx context.Context, recs []claimRecord) (done []types.UID, failures []string, missing map[string][]string) {
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
			if missing == nil {
				missing = map[string][]string{}
			}
			for _, it := range items {
				if key := it.namespace + "/" + it.name; !slices.Contains(missing[name], key) {
					missing[name] = append(missing[name], key)
				}
			}
			continue
		}
		if d.isKubelet() {
			unprepared, fails := m.unprepareKubelet(ctx, d, items)
			failures = append(failures, fails...)
			for _, it := range unprepared {
				if ok[it.uid] == nil {
					ok[it.uid] = map[string]bool{}
				}
				ok[it.uid][name] = true
			}
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
func (m *Manager) unprepareFailed(podUID types.UID, now time.Time, failures []string, missing map[string][]string) error {
	e := &UnprepareError{Failures: failures, Missing: missing}
	m.pods.with(podUID, func(st *podState) {
		st.relFailures++
		st.relRetryAt = now.Add(m.backoff(st.relFailures))
		st.relErr = e
		st.waitDrivers = setOf(slices.Collect(maps.Keys(missing)))
		e.At = st.relRetryAt
	})
	return e
}

// reportBlocked tells why the pod's deletion waits: a Warning event at
// each failed attempt (so at the back-off's pace; the recorder counts
// repeats) and the condition ResourceClaimsUnprepared=False with the
// reason, written when it changes. A failed write is logged only: the
// next attempt writes it again.
func (m *Manager) reportBlocked(ctx context.Context, pod *corev1.Pod, e *UnprepareError) {
	reason, msg := e.reasonMessage(pod, m.opts.NodeName)
	if m.opts.Events != nil {
		m.opts.Events.Eventf(pod, corev1.EventTypeWarning, reason, "%s", msg)
	}
	c := corev1.PodCondition{Type: corev1.PodResourceClaimsUnprepared, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
	if err := m.setCondition(ctx, pod.Namespace, pod.Name, pod.UID, c); err != nil {
		m.log.Warn("record why the pod's claims are not unprepared", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// markUnprepared sets the pod condition ResourceClaimsUnprepared=True,
// keeping the other conditions. A pod that is gone (or whose name now
// belongs to another pod) needs none.
func (m *Manager) markUnprepared(ctx context.Context, ns, name string, uid types.UID) error {
	return m.setCondition(ctx, ns, name, uid, corev1.PodCondition{
		Type: corev1.PodResourceClaimsUnprepared, Status: corev1.ConditionTrue, Reason: ReasonUnprepared,
		Message: "the node agent of " + m.opts.NodeName + " unprepared the pod's resource claims",
	})
}

// setCondition writes the pod's ResourceClaimsUnprepared condition unless
// it already reads so (status, reason and message), keeping the others.
// True is final: it is never replaced. A pod that is gone (or whose name
// now belongs to another pod) needs none.
func (m *Manager) setCondition(ctx context.Context, ns, name string, uid types.UID, c corev1.PodCondition) error {
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
		case pod.UID != uid || hasUnprepared(pod) || hasCondition(pod, c):
			return nil
		}
		setCondition(pod, c)
		actx, cancel = m.apiContext(ctx)
		_, err = pc.UpdateStatus(actx, pod)
		cancel()
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("set condition %s of pod %s/%s: %w", c.Type, ns, name, err)
		}
	}
	return fmt.Errorf("set condition %s of pod %s/%s: conflicting writes", c.Type, ns, name)
}

func hasCondition(pod *corev1.Pod, c corev1.PodCondition) bool {
	for _, x := range pod.Status.Conditions {
		if x.Type == c.Type {
			return x.Status == c.Status && x.Reason == c.Reason && x.Message == c.Message
		}
	}
	return false
}

func hasUnprepared(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResourceClaimsUnprepared {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setCondition sets c on the pod, its transition time now (to the second,
// as the API stores it).
func setCondition(pod *corev1.Pod, c corev1.PodCondition) {
	c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			if pod.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = pod.Status.Conditions[i].LastTransitionTime
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
