package kubeletplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/validation"
)

// PublishResources enumerates the driver's resources again and, when the
// model differs from the last one, sends it on every open
// NodeListAndWatchResources stream (APIAllot), or writes it as the node's
// ResourceSlices (APIKubelet; in the background, see Options.API). On
// error (Enumerate failed, the model is invalid, or with APIKubelet it
// cannot be expressed as v1 devices) the previous model stays.
func (p *Plugin) PublishResources(ctx context.Context) error {
	p.publishMu.Lock()
	defer p.publishMu.Unlock()
	m, err := p.driver.Enumerate(ctx)
	if err != nil {
		return fmt.Errorf("enumerate resources: %w", err)
	}
	if err := ValidateModel(m); err != nil {
		return fmt.Errorf("enumerate resources: %w", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode resource model: %w", err)
	}
	if p.slices != nil {
		devices, warnings, err := v1Devices(p.opts.DriverName, p.opts.NodeName, m)
		if err != nil {
			return fmt.Errorf("enumerate resources: %w", err)
		}
		for _, w := range warnings {
			p.log.Warn("left out of the published devices", "problem", w)
		}
		p.slices.setDevices(devices)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if bytes.Equal(data, p.model) {
		return nil
	}
	p.model = data
	close(p.changed)
	p.changed = make(chan struct{})
	p.log.Debug("resource model changed", "bytes", len(data))
	return nil
}

// currentModel returns the model's JSON and a channel closed when it
// changes.
func (p *Plugin) currentModel() ([]byte, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.model, p.changed
}

// ValidateModel checks a model as the API server checks the
// NodeResourceSlice that will hold it: exactly one model, valid unique
// names, references to existing attribute groups, one value per attribute.
// Error paths are relative to the model ("partitionable.resourceInstances[0].name"),
// which is also the spec of a NodeResourceSlice minus its nodeName and
// driverName.
func ValidateModel(m resourcev1alpha2.NodeResourceModel) error {
	slice := &resourcev1alpha2.NodeResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "model"},
		Spec: resourcev1alpha2.NodeResourceSliceSpec{
			NodeName:          "node",
			DriverName:        "driver.example.com",
			NodeResourceModel: m,
		},
	}
	errs := validation.ValidateNodeResourceSlice(slice)
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		e.Field = strings.TrimPrefix(e.Field, "spec.")
		if e.Field == "spec" {
			e.Field = "model"
		}
		msgs = append(msgs, e.Error())
	}
	return fmt.Errorf("invalid resource model: %s", strings.Join(msgs, "; "))
}
