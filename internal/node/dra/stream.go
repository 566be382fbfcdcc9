package dra

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
)

// ReasonInvalidResourceModel is the reason of the Node event recorded when a
// driver streams a model that cannot be published.
const ReasonInvalidResourceModel = "InvalidResourceModel"

// runDriver follows the driver's resource stream. A broken stream is
// re-opened up to MaxRedials times; when that fails the driver counts as
// gone. A driver that does not implement the stream (a control-plane
// driver) publishes no slice and stays registered.
func (m *Manager) runDriver(d *driver) {
	failures := 0
	for {
		received, err := m.watchResources(d)
		if d.ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			m.log.Info("DRA driver publishes no resources", "driver", d.name)
			return
		}
		m.metrics.errors.WithLabelValues(d.name, opListAndWatch).Inc()
		if received {
			failures = 0
		}
		failures++
		if failures > MaxRedials {
			m.unregisterDriver(d, fmt.Sprintf("its resource stream broke and could not be re-opened: %v", err))
			return
		}
		m.log.Warn("DRA driver resource stream ended, re-opening", "driver", d.name, "attempt", failures, "err", err)
		select {
		case <-d.ctx.Done():
			return
		case <-time.After(m.opts.RedialInterval):
		}
	}
}

// watchResources publishes every model of one stream until it ends; it
// reports whether any message arrived. The stream has no deadline: it
// lives as long as the driver's registration.
func (m *Manager) watchResources(d *driver) (received bool, err error) {
	stream, err := d.client.NodeListAndWatchResources(d.ctx, &drapb.NodeListAndWatchResourcesRequest{})
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return received, errors.New("the driver closed the stream")
		}
		if err != nil {
			return received, err
		}
		received = true
		m.applyModel(d, resp.GetResourceModel())
	}
}

// applyModel publishes a model streamed by d, unless d was replaced or the
// model is invalid (then the slice keeps the previous one).
func (m *Manager) applyModel(d *driver, raw []byte) {
	model, err := m.decodeModel(d.name, raw)
	if err != nil {
		m.metrics.errors.WithLabelValues(d.name, opListAndWatch).Inc()
		m.log.Warn("DRA driver sent an invalid resource model; the slice keeps the previous one", "driver", d.name, "err", err)
		m.nodeEvent(corev1.EventTypeWarning, ReasonInvalidResourceModel,
			"DRA driver %s sent an invalid resource model, its NodeResourceSlice keeps the previous one: %v", d.name, err)
		return
	}
	if !m.drivers.isLive(d) {
		return
	}
	m.slices.publish(d.name, model)
	if m.health.set(d.name, model) {
		m.healthChanged(d.name)
	}
}

// decodeModel decodes a streamed model strictly (an unknown or repeated
// field is an error) and validates it as the slice it becomes.
func (m *Manager) decodeModel(driverName string, raw []byte) (*resourcev1alpha2.NodeResourceModel, error) {
	model := &resourcev1alpha2.NodeResourceModel{}
	if err := scheme.DecodeStrictInto(raw, model); err != nil {
		return nil, fmt.Errorf("resource_model: %w", err)
	}
	s := &resourcev1alpha2.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: sliceName(m.opts.NodeName, driverName)},
		Spec:       resourcev1alpha2.NodeResourceSliceSpec{NodeName: m.opts.NodeName, DriverName: driverName, NodeResourceModel: *model},
	}
	if errs := validation.ValidateNodeResourceSlice(s); len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("resource_model: %s", strings.Join(msgs, "; "))
	}
	return model, nil
}
