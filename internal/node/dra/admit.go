package dra

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"tags.cncf.io/container-device-interface/pkg/parser"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/internal/node/pods"
)

// Hold reasons of Admit. A pod is never rejected for DRA reasons: claims
// may still be allocated and reserved for a pod placed by hand.
const (
	// ReasonWaitingForClaim: a claim is missing, not allocated, not
	// reserved for the pod, or allocated for other nodes.
	ReasonWaitingForClaim = "WaitingForResourceClaim"
	// ReasonDriverNotRegistered: a claim's driver has no plugin here.
	ReasonDriverNotRegistered = "DRADriverNotRegistered"
	// ReasonPrepareFailed: a driver failed to prepare a claim; the
	// message has its error and the time of the next attempt.
	ReasonPrepareFailed = "PrepareResourcesFailed"
	// ReasonPodGone: the pod was deleted (or replaced) before its claims
	// were prepared; they are not, and its release drops them.
	ReasonPodGone = "PodGone"
)

// retryTimeFormat shows when the next attempt is, to the millisecond.
const retryTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Admit holds pod until every claim it uses is allocated, reserved for it
// and usable here and their drivers are registered, then prepares the
// claims not prepared yet (batched per driver) and records them in the
// checkpoint before admitting. Failed prepares are retried with
// exponential back-off; the pod's worker is woken when the back-off ends
// or one of its claims changes.
func (m *Manager) Admit(ctx context.Context, pod *corev1.Pod) pods.Admission {
	if !pod.UsesResourceClaims() {
		return pods.Admitted()
	}
	if m.claims == nil {
		return pods.HoldPod(ReasonWaitingForClaim, "the DRA manager has not started")
	}
	var reread map[string]bool
	m.pods.with(pod.UID, func(st *podState) { reread = maps.Clone(st.reread) })
	chk := m.checkClaims(ctx, pod, reread)
	missing := m.missingDrivers(chk.ready)
	m.pods.with(pod.UID, func(st *podState) {
		st.waitClaims, st.waitDrivers = setOf(chk.keys), setOf(missing)
	})
	if len(chk.problems) > 0 {
		return pods.HoldPod(ReasonWaitingForClaim, "waiting for resource claims: "+strings.Join(chk.problems, "; "))
	}
	if len(missing) > 0 {
		return pods.HoldPod(ReasonDriverNotRegistered,
			fmt.Sprintf("DRA driver %s is not registered on node %s", strings.Join(missing, ", "), m.opts.NodeName))
	}
	return m.prepare(ctx, pod, chk.ready)
}

// missingDrivers returns the drivers of the claims that are not
// registered, sorted.
func (m *Manager) missingDrivers(ready []readyClaim) []string {
	var out []string
	for _, rc := range ready {
		for _, h := range rc.handles {
			if m.drivers.get(h.driver) == nil && !slices.Contains(out, h.driver) {
				out = append(out, h.driver)
			}
		}
	}
	sort.Strings(out)
	return out
}

// prepare prepares what the ready claims still need, unless the pod is in
// back-off.
func (m *Manager) prepare(ctx context.Context, pod *corev1.Pod, ready []readyClaim) pods.Admission {
	now := time.Now()
	var held *pods.Admission
	m.pods.with(pod.UID, func(st *podState) {
		if now.Before(st.retryAt) {
			h := st.hold
			held = &h
		}
	})
	if held != nil {
		return *held
	}
	uids := make([]types.UID, 0, len(ready))
	for _, rc := range ready {
		uids = append(uids, rc.claim.UID)
	}
	unlock := m.locks.lock(uids)
	defer unlock()
	pending, changed := m.store.attach(pod.Namespace, pod.Name, pod.UID, ready)
	if changed { // before any call: a prepared claim is never forgotten
		if err := m.saveStore(); err != nil {
			return m.prepareFailed(pod, time.Now(), []string{err.Error()}, nil)
		}
	}
	if changed || len(pending) > 0 {
		// Published before any call (also when an earlier attempt's
		// write failed), then the pod confirmed: the claim controller
		// releases a gone pod's reservation only after it saw the pod
		// gone and then found no node listing the claim for it, so it
		// sees this list, or this read sees no pod.
		if err := m.published.sync(ctx); err != nil {
			return m.prepareFailed(pod, time.Now(), []string{err.Error()}, nil)
		}
		if gone, err := m.podGone(ctx, pod); err != nil {
			return m.prepareFailed(pod, time.Now(), []string{err.Error()}, nil)
		} else if gone {
			m.published.later()
			return pods.HoldPod(ReasonPodGone, "the pod is no longer in the API server: its claims are not prepared")
		}
	}
	failures, notFound := m.callPrepares(ctx, pending)
	if len(pending) > 0 {
		if err := m.saveStore(); err != nil {
			failures = append(failures, err.Error())
		}
	}
	if len(failures) > 0 {
		return m.prepareFailed(pod, time.Now(), failures, notFound)
	}
	m.pods.forget(pod.UID)
	if len(pending) > 0 {
		m.log.Info("DRA claims prepared", "pod", pod.Namespace+"/"+pod.Name, "claims", len(ready))
	}
	return pods.Admitted()
}

// podGone reads the pod from the API server (not a cache): whether it
// was deleted, or replaced by another pod of the same name.
func (m *Manager) podGone(ctx context.Context, pod *corev1.Pod) (bool, error) {
	actx, cancel := m.apiContext(ctx)
	defer cancel()
	cur, err := m.opts.Client.Pods(pod.Namespace).Get(actx, pod.Name)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read pod %s/%s before preparing its claims: %w", pod.Namespace, pod.Name, err)
	}
	return cur.UID != pod.UID, nil
}

// callPrepares calls each driver once with its pending claims (an allot
// driver with their handles, a kubelet driver with their references). It
// returns the failures and the claims (NAMESPACE/NAME) an allot driver
// did not find. A kubelet driver's NOT_FOUND is not told apart: the
// claims are read from the informers' caches before every attempt.
func (m *Manager) callPrepares(ctx context.Context, pending map[string][]batchItem) (failures, notFound []string) {
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		items := pending[name]
		d := m.drivers.get(name)
		if d == nil {
			failures = append(failures, fmt.Sprintf("driver %s is not registered", name))
			continue
		}
		if d.isKubelet() {
			failures = append(failures, m.prepareKubelet(ctx, d, items)...)
			continue
		}
		resp, err := m.callPrepare(ctx, d, items)
		if err != nil {
			failures = append(failures, fmt.Sprintf("driver %s: %v", name, err))
			if status.Code(err) == codes.NotFound {
				for _, it := range items {
					notFound = append(notFound, it.namespace+"/"+it.name)
				}
			}
			continue
		}
		failed := false
		for _, it := range items {
			key := it.namespace + "/" + it.name
			r := resp.GetClaims()[string(it.uid)]
			switch {
			case r == nil:
				failures = append(failures, fmt.Sprintf("driver %s gave no result for claim %s", name, key))
			case r.GetError() != "":
				failures = append(failures, fmt.Sprintf("driver %s: claim %s: %s", name, key, r.GetError()))
				if codes.Code(r.GetErrorCode()) == codes.NotFound {
					notFound = append(notFound, key)
				}
			default:
				if err := validCDINames(r.GetCdiDevices()); err != nil {
					failures = append(failures, fmt.Sprintf("driver %s: claim %s: %v", name, key, err))
					break
				}
				m.store.markPrepared(it.uid, name, r.GetCdiDevices())
				continue
			}
			failed = true
		}
		if failed {
			m.metrics.errors.WithLabelValues(name, opPrepare).Inc()
		}
	}
	return failures, notFound
}

// validCDINames checks that a driver answered fully qualified CDI device
// names (vendor.com/class=name).
func validCDINames(names []string) error {
	for _, n := range names {
		if _, _, _, err := parser.ParseQualifiedName(n); err != nil {
			return fmt.Errorf("CDI device %q: %w", n, err)
		}
	}
	return nil
}

// callPrepare is one NodePrepareResources call, with its deadline.
func (m *Manager) callPrepare(ctx context.Context, d *driver, items []batchItem) (*drapb.NodePrepareResourcesResponse, error) {
	req := &drapb.NodePrepareResourcesRequest{}
	for _, it := range items {
		req.Claims = append(req.Claims, it.proto())
	}
	cctx, cancel := d.callContext(ctx, m.opts.PrepareTimeout)
	defer cancel()
	start := time.Now()
	resp, err := d.client.NodePrepareResources(cctx, req)
	m.metrics.observe(d.name, opPrepare, start, err)
	return resp, err
}

// prepareFailed starts or extends the pod's back-off, counted from now (when
// the failure was seen, after the call), and returns its hold.
func (m *Manager) prepareFailed(pod *corev1.Pod, now time.Time, failures, notFound []string) pods.Admission {
	var hold pods.Admission
	uid := pod.UID
	m.pods.with(uid, func(st *podState) {
		st.failures++
		st.retryAt = now.Add(m.backoff(st.failures))
		st.reread = nil // this attempt read them; only new NOT_FOUNDs need it again
		if len(notFound) > 0 {
			st.reread = setOf(notFound)
		}
		msg := fmt.Sprintf("preparing resource claims failed (attempt %d): %s; next attempt at %s",
			st.failures, strings.Join(failures, "; "), st.retryAt.Format(retryTimeFormat))
		if len(notFound) > 0 {
			msg += "; claims answered NOT_FOUND are read again from the API server first"
		}
		st.hold = pods.HoldPod(ReasonPrepareFailed, msg)
		hold = st.hold
		if st.wake != nil {
			st.wake.Stop()
		}
		st.wake = time.AfterFunc(st.retryAt.Sub(now), func() { m.opts.Wake(uid) })
	})
	m.log.Warn("DRA prepare failed", "pod", pod.Namespace+"/"+pod.Name, "message", hold.Message)
	return hold
}

// saveStore writes the checkpoint and updates the prepared-claims gauge.
func (m *Manager) saveStore() error {
	m.metrics.prepared.Set(float64(m.store.count()))
	return m.store.save()
}
