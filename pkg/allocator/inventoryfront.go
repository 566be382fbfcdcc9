package allocator

import (
	"fmt"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
)

// NewInventory builds the inventory from the v1 ResourceSlices and the
// seed NodeResourceSlices. Pools are V1Pools' and SeedDevices', sorted by
// driver and name; a v1 pool with the name and driver of a projected seed
// pool is made Invalid (its devices and the seed's would share state keys).
// Devices with bindingConditions are allocated as any other; their results
// carry the conditions (DRADeviceBindingConditions). The inputs must not be modified afterwards.
func NewInventory(slices_ []*resourcev1.ResourceSlice, seed []*resourceapi.NodeResourceSlice) *engine.Inventory {
	return NewInventoryModels(slices_, seed, nil)
}

// NewInventoryModels is NewInventory with the seed slices' compiled
// Models supplied by the caller, so that a node's seed slices are
// compiled once for both APIs: model(node, slices) must return a Model
// equal to NewModel(node, slices) (a cached one; the slices are the node's
// seed slices, in no particular order). A nil model compiles them.
func NewInventoryModels(slices_ []*resourcev1.ResourceSlice, seed []*resourceapi.NodeResourceSlice, model func(node string, slices []*resourceapi.NodeResourceSlice) *Model) *engine.Inventory {
	return NewInventoryTainted(slices_, seed, model, nil)
}

// NewInventoryTainted is NewInventoryModels with DeviceTaintRules
// (taintrules.go): the rules' taints are added to the v1 devices they
// select, and the seed devices take theirs from the Models, which must
// then equal NewModelTainted(node, slices, rules) (a nil model compiles
// them so).
func NewInventoryTainted(slices_ []*resourcev1.ResourceSlice, seed []*resourceapi.NodeResourceSlice,
	model func(node string, slices []*resourceapi.NodeResourceSlice) *Model, rules []*resourcev1.DeviceTaintRule) *engine.Inventory {
	v1pools, problems := V1Pools(slices_)
	applyTaintRules(v1pools, rules)
	if model == nil && len(rules) > 0 {
		model = func(node string, slices []*resourceapi.NodeResourceSlice) *Model {
			return NewModelTainted(node, slices, rules)
		}
	}
	seedPools, seedProblems := seedDevices(seed, model)
	problems = append(problems, seedProblems...)
	var pools []engine.Pool
	seedNames := map[string]bool{}
	for _, p := range seedPools {
		seedNames[p.Driver+"\x00"+p.Name] = true
	}
	for _, p := range v1pools {
		switch {
		case seedNames[p.Driver+"\x00"+p.Name]:
			p.Invalid = fmt.Sprintf("pool %s of driver %s is also the projection of the seed NodeResourceSlices of node %s", p.Name, p.Driver, p.Name)
		case p.Node != "" && seedNames[p.Driver+"\x00"+p.Node]:
			// The API refuses this at create, but not atomically: the
			// seed slice wins, so no device is counted twice.
			p.Invalid = fmt.Sprintf("driver %s publishes node %s through a NodeResourceSlice too; a driver publishes a node's devices "+
				"through one API, and these ResourceSlices are skipped", p.Driver, p.Node)
		}
		if p.Invalid != "" {
			problems = append(problems, engine.InventoryProblem{Driver: p.Driver, Pool: p.Name, Reason: p.Invalid})
		}
		pools = append(pools, p)
	}
	return engine.NewInventory(append(pools, seedPools...), problems)
}
