package dra

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// kubeletClaim is the reference a kubelet driver gets of a claim: it
// reads the allocation and its configuration from the API server itself.
func (b batchItem) kubeletClaim() *drapbv1.Claim {
	return &drapbv1.Claim{Namespace: b.namespace, Uid: string(b.uid), Name: b.name}
}

// prepareKubelet prepares items through a kubelet driver and records each
// success. The driver answers per claim; an answer for a claim not asked
// for fails the call, as in the kubelet. When the whole call fails and it
// had several claims, each is tried again alone: the upstream library
// fails a whole call when it cannot read one claim (deleted, replaced),
// which must not hold the pods of the others (unless the driver did not
// answer at all).
func (m *Manager) prepareKubelet(ctx context.Context, d *driver, items []batchItem) (failures []string) {
	err := m.prepareKubeletBatch(ctx, d, items, &failures)
	if err == nil {
		return failures
	}
	if len(items) == 1 {
		return append(failures, fmt.Sprintf("driver %s: claim %s/%s: %v", d.name, items[0].namespace, items[0].name, err))
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		// The driver did not answer: calling it once per claim would only
		// wait as long again for each.
		return append(failures, fmt.Sprintf("driver %s: %v", d.name, err))
	}
	m.log.Warn("DRA driver failed a batch of claims; preparing them one by one", "driver", d.name, "claims", len(items), "err", err)
	failures = failures[:0]
	for _, it := range items {
		if err := m.prepareKubeletBatch(ctx, d, []batchItem{it}, &failures); err != nil {
			failures = append(failures, fmt.Sprintf("driver %s: claim %s/%s: %v", d.name, it.namespace, it.name, err))
		}
	}
	return failures
}

// prepareKubeletBatch is one NodePrepareResources call of a kubelet
// driver. It returns the error of the call as a whole, and appends the
// failures of single claims to failures.
func (m *Manager) prepareKubeletBatch(ctx context.Context, d *driver, items []batchItem, failures *[]string) error {
	req := &drapbv1.NodePrepareResourcesRequest{}
	asked := map[string]bool{}
	for _, it := range items {
		req.Claims = append(req.Claims, it.kubeletClaim())
		asked[string(it.uid)] = true
	}
	cctx, cancel := d.callContext(ctx, m.opts.PrepareTimeout)
	start := time.Now()
	resp, err := d.kubelet.NodePrepareResources(cctx, req)
	cancel()
	m.metrics.observe(d.name, opPrepare, start, err)
	if err != nil {
		return err
	}
	for uid := range resp.GetClaims() {
		if !asked[uid] {
			m.metrics.errors.WithLabelValues(d.name, opPrepare).Inc()
			return fmt.Errorf("the driver answered for claim UID %s, which was not asked for", uid)
		}
	}
	failed := false
	for _, it := range items {
		key := it.namespace + "/" + it.name
		r := resp.GetClaims()[string(it.uid)]
		var devices []deviceRecord
		var problem error
		switch {
		case r == nil:
			problem = fmt.Errorf("no result")
		case r.GetError() != "":
			problem = fmt.Errorf("%s", r.GetError())
		default:
			devices, problem = kubeletDevices(r.GetDevices())
		}
		if problem != nil {
			*failures = append(*failures, fmt.Sprintf("driver %s: claim %s: %v", d.name, key, problem))
			failed = true
			continue
		}
		m.store.markPreparedDevices(it.uid, d.name, devices)
	}
	if failed {
		m.metrics.errors.WithLabelValues(d.name, opPrepare).Inc()
	}
	return nil
}

// kubeletDevices checks and copies a kubelet driver's prepared devices:
// each names its device and pool, and its CDI devices are fully
// qualified names (vendor.com/class=name).
func kubeletDevices(in []*drapbv1.Device) ([]deviceRecord, error) {
	out := make([]deviceRecord, 0, len(in))
	for i, dev := range in {
		if dev.GetDeviceName() == "" || dev.GetPoolName() == "" {
			return nil, fmt.Errorf("device %d of the answer names no device or no pool", i)
		}
		if err := validCDINames(dev.GetCdiDeviceIds()); err != nil {
			return nil, fmt.Errorf("device %s/%s: %w", dev.GetPoolName(), dev.GetDeviceName(), err)
		}
		rec := deviceRecord{Requests: dev.GetRequestNames(), Pool: dev.GetPoolName(), Device: dev.GetDeviceName(),
			CDIDevices: dev.GetCdiDeviceIds()}
		if dev.ShareId != nil {
			id := dev.GetShareId()
			rec.ShareID = &id
		}
		out = append(out, rec.clone())
	}
	return out, nil
}

// unprepareKubelet unprepares items through a kubelet driver. It returns
// the claims the driver unprepared and the failures.
func (m *Manager) unprepareKubelet(ctx context.Context, d *driver, items []batchItem) (done []batchItem, failures []string) {
	req := &drapbv1.NodeUnprepareResourcesRequest{}
	for _, it := range items {
		req.Claims = append(req.Claims, it.kubeletClaim())
	}
	cctx, cancel := d.callContext(ctx, m.opts.PrepareTimeout)
	start := time.Now()
	resp, err := d.kubelet.NodeUnprepareResources(cctx, req)
	cancel()
	m.metrics.observe(d.name, opUnprepare, start, err)
	if err != nil {
		return nil, []string{fmt.Sprintf("driver %s: %v", d.name, err)}
	}
	for _, it := range items {
		key := it.namespace + "/" + it.name
		r := resp.GetClaims()[string(it.uid)]
		switch {
		case r == nil:
			failures = append(failures, fmt.Sprintf("driver %s gave no result for claim %s", d.name, key))
		case r.GetError() != "":
			failures = append(failures, fmt.Sprintf("driver %s: claim %s: %s", d.name, key, strings.TrimSpace(r.GetError())))
		default:
			done = append(done, it)
		}
	}
	if len(failures) > 0 {
		m.metrics.errors.WithLabelValues(d.name, opUnprepare).Inc()
	}
	return done, failures
}
