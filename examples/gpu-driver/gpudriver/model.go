package gpudriver

import (
	_ "embed"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/pkg/driver/kubeletplugin"
)

// defaultModel is the model served without --config.
//
//go:embed default-model.yaml
var defaultModel []byte

// defaultModelV1 is the model served with --publish=v1 and without
// --config: v1 devices cannot express the default model's partitions.
//
//go:embed default-model-v1.yaml
var defaultModelV1 []byte

// loadModel reads and validates the model file, or the default model of
// the publishing mode when path is empty.
func loadModel(path, publish string) (*inventory, error) {
	data, source := defaultModel, "built-in model"
	if publish == PublishV1 {
		data, source = defaultModelV1, "built-in v1 model"
	}
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("read model: %w", err)
		}
		source = path
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse model %s: %w", source, err)
	}
	var m resourcev1alpha2.NodeResourceModel
	if err := scheme.DecodeStrictInto(j, &m); err != nil {
		return nil, fmt.Errorf("parse model %s: %w", source, err)
	}
	if err := kubeletplugin.ValidateModel(m); err != nil {
		return nil, fmt.Errorf("model %s: %w", source, err)
	}
	return newInventory(m), nil
}

// inventory is an immutable model with its allocatable instances indexed
// by ID.
type inventory struct {
	model resourcev1alpha2.NodeResourceModel
	// leaves maps the ID of every instance without partitions
	// ("partitionable-gpu-1/quarters/quarter-0") to its facts.
	leaves map[string]leaf
}

// leaf is an allocatable instance.
type leaf struct {
	// number is the instance's position among the model's allocatable
	// instances, depth first; its device node is /dev/gpu-example-NUMBER.
	number int
	// unhealthy is set when the instance or an ancestor is Unhealthy.
	unhealthy bool
}

func newInventory(m resourcev1alpha2.NodeResourceModel) *inventory {
	inv := &inventory{model: m, leaves: map[string]leaf{}}
	if m.Partitionable != nil {
		inv.add("", m.Partitionable.ResourceInstances, false)
	}
	return inv
}

// add indexes instances below the partition group with ID prefix ("" for
// roots); IDs alternate instance and group names, as the allocator forms
// them.
func (inv *inventory) add(prefix string, list []resourcev1alpha2.ResourceInstance, unhealthy bool) {
	for i := range list {
		in := &list[i]
		id := prefix + in.Name
		sick := unhealthy || in.Health == resourcev1alpha2.InstanceUnhealthy
		if len(in.Partitions) == 0 {
			inv.leaves[id] = leaf{number: len(inv.leaves), unhealthy: sick}
			continue
		}
		for _, g := range in.Partitions {
			inv.add(id+"/"+g.Name+"/", g.ResourceInstances, sick)
		}
	}
}
