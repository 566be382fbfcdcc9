package dra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

	corev1 "allot.dev/allot/api/core/v1"
)

// DefaultDeviceHealthTimeout is how long a device's health reported by a
// kubelet driver stays valid when the driver names no timeout: the
// kubelet's default. After it, the device reads Unknown.
const DefaultDeviceHealthTimeout = 30 * time.Second

// maxHealthMessage is the longest health message kept, as the kubelet
// API says (longer ones are cut to 1021 characters and "...").
const maxHealthMessage = 1024

// deviceKey names a device of a kubelet driver.
type deviceKey struct{ pool, device string }

// deviceHealth is the last health a kubelet driver reported of a device.
type deviceHealth struct {
	health  corev1.ResourceHealthStatus
	message string
	expires time.Time
}

// deviceHealthSet owns the health kubelet drivers stream: driver →
// device → last report. Guarded by mu.
type deviceHealthSet struct {
	mu      sync.Mutex
	drivers map[string]map[deviceKey]deviceHealth
}

func newDeviceHealthSet() *deviceHealthSet {
	return &deviceHealthSet{drivers: map[string]map[deviceKey]deviceHealth{}}
}

// update records one message of driver's stream at now and reports
// whether any device's health or message changed, and when the earliest
// of the reports it recorded expires.
func (s *deviceHealthSet) update(driver string, resp *drahealthv1.NodeWatchResourcesResponse, now time.Time) (changed bool, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	devs := s.drivers[driver]
	if devs == nil {
		devs = map[deviceKey]deviceHealth{}
		s.drivers[driver] = devs
	}
	for _, dh := range resp.GetDevices() {
		key := deviceKey{pool: dh.GetDevice().GetPoolName(), device: dh.GetDevice().GetDeviceName()}
		if key.device == "" {
			continue
		}
		timeout := time.Duration(dh.GetHealthCheckTimeoutSeconds()) * time.Second
		if timeout <= 0 {
			timeout = DefaultDeviceHealthTimeout
		}
		next := deviceHealth{health: healthStatus(dh.GetHealth()), message: healthMessage(dh.GetMessage()), expires: now.Add(timeout)}
		prev, had := devs[key]
		if !had || prev.health != next.health || prev.message != next.message || !prev.expires.After(now) {
			changed = true
		}
		devs[key] = next
		if expires.IsZero() || next.expires.Before(expires) {
			expires = next.expires
		}
	}
	return changed, expires
}

func healthStatus(h drahealthv1.HealthStatus) corev1.ResourceHealthStatus {
	switch h {
	case drahealthv1.HealthStatus_HEALTHY:
		return corev1.ResourceHealthStatusHealthy
	case drahealthv1.HealthStatus_UNHEALTHY:
		return corev1.ResourceHealthStatusUnhealthy
	}
	return corev1.ResourceHealthStatusUnknown
}

func healthMessage(m string) string {
	if len(m) <= maxHealthMessage {
		return m
	}
	return m[:maxHealthMessage-3] + "..."
}

// forget drops driver's reports and reports whether it had any.
func (s *deviceHealthSet) forget(driver string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.drivers[driver]
	delete(s.drivers, driver)
	return had
}

// of returns a device's health at now and the message that came with it:
// Unknown when the driver reported nothing of it, or not within the
// timeout of its last report.
func (s *deviceHealthSet) of(driver, pool, device string, now time.Time) (corev1.ResourceHealthStatus, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.drivers[driver][deviceKey{pool: pool, device: device}]
	if !ok || !h.expires.After(now) {
		return corev1.ResourceHealthStatusUnknown, ""
	}
	return h.health, h.message
}

// runHealth follows the health stream of a kubelet driver's instance that
// offers one, re-opening it RedialInterval after it breaks, until the
// instance goes. A driver that answers Unimplemented reports no health.
func (m *Manager) runHealth(d *driver) {
	var client drahealthv1.DRAResourceHealthClient
	switch d.reg.health {
	case drahealthv1.DRAResourceHealthService:
		client = drahealthv1.NewDRAResourceHealthClient(d.conn)
	case drahealthv1alpha1.DRAResourceHealthService:
		client = drahealthv1.V1Alpha1ClientWrapper{Client: drahealthv1alpha1.NewDRAResourceHealthClient(d.conn)}
	default:
		return
	}
	for {
		err := m.watchHealth(d, client)
		if d.ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			m.log.Info("DRA driver reports no device health", "driver", d.name)
			return
		}
		m.metrics.errors.WithLabelValues(d.name, opHealth).Inc()
		m.log.Warn("DRA driver health stream ended, re-opening", "driver", d.name, "err", err)
		select {
		case <-d.ctx.Done():
			return
		case <-time.After(m.opts.RedialInterval):
		}
	}
}

// watchHealth records every message of one health stream until it ends.
// Reports of an instance that is no longer the one called are dropped.
func (m *Manager) watchHealth(d *driver, client drahealthv1.DRAResourceHealthClient) error {
	stream, err := client.NodeWatchResources(d.ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the driver closed the stream")
		}
		if err != nil {
			return err
		}
		if m.drivers.get(d.name) != d {
			continue
		}
		now := time.Now()
		changed, expires := m.devHealth.update(d.name, resp, now)
		if changed {
			m.healthChanged(d.name)
		}
		if !expires.IsZero() {
			// The pods see Unknown once the reports expire unrenewed.
			time.AfterFunc(expires.Sub(now)+time.Millisecond, func() {
				if d.ctx.Err() == nil {
					m.healthChanged(d.name)
				}
			})
		}
	}
}

// watchConnection keeps a kubelet driver instance's connection open and
// unregisters the instance when it stays broken for MaxRedials redial
// intervals: a driver killed with SIGKILL leaves its registration socket
// behind, and without this its slices would never be wiped, as the
// kubelet wipes those of a driver with no connected instance. (allot
// drivers are followed through their resource stream instead.) A driver
// that comes back creates its sockets anew and registers again.
func (m *Manager) watchConnection(d *driver) {
	limit := time.Duration(MaxRedials) * m.opts.RedialInterval
	var brokenSince time.Time
	d.conn.Connect()
	for {
		st := d.conn.GetState()
		switch {
		case st == connectivity.Ready || st == connectivity.Idle || st == connectivity.Connecting && brokenSince.IsZero():
			brokenSince = time.Time{}
			if st == connectivity.Idle {
				d.conn.Connect()
			}
		case st == connectivity.TransientFailure && brokenSince.IsZero():
			brokenSince = time.Now()
		}
		wait := limit
		if !brokenSince.IsZero() {
			if wait = limit - time.Since(brokenSince); wait <= 0 {
				m.unregisterDriver(d, fmt.Sprintf("its DRA socket %s has not answered for %s", d.endpoint, limit))
				return
			}
		}
		ctx, cancel := context.WithTimeout(d.ctx, wait)
		d.conn.WaitForStateChange(ctx, st)
		cancel()
		if d.ctx.Err() != nil {
			return
		}
	}
}
