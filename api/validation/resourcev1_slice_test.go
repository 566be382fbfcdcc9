package validation

import (
	"fmt"
	"strings"
	"testing"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Fixtures of resource.k8s.io/v1 objects. Each is valid; tests change one
// thing.

func v1Device(name string) resourcev1.Device {
	return resourcev1.Device{
		Name: name,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"index":                 {IntValue: ptr(int64(0))},
			"model":                 {StringValue: ptr("LATEST-GPU-MODEL")},
			"driverVersion":         {VersionValue: ptr("1.0.0")},
			"gpu.example.com/numa":  {IntValue: ptr(int64(1))},
			"dra.k8s.io/pcieRoot":   {StringValue: ptr("pci0000:00")},
			"gpu.example.com/ecc":   {BoolValue: ptr(true)},
			"gpu.example.com/arch":  {StringValue: ptr("hopper")},
			"gpu.example.com/cores": {IntValue: ptr(int64(132))},
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
	}
}

func v1Slice(f func(*resourcev1.ResourceSlice)) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: objMeta("node-1-gpu.example.com", ""),
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourcev1.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr("node-1"),
			Devices:  []resourcev1.Device{v1Device("gpu-0")},
		},
	}
	if f != nil {
		f(s)
	}
	return s
}

// counterSlice is a slice of a pool that publishes its counter sets; the
// devices consuming them are in other slices of the pool.
func counterSlice(f func(*resourcev1.ResourceSlice)) *resourcev1.ResourceSlice {
	return v1Slice(func(s *resourcev1.ResourceSlice) {
		s.Spec.Devices = nil
		s.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "gpu-0-counters", Counters: map[string]resourcev1.Counter{
			"memory": {Value: resource.MustParse("80Gi")}, "slices": {Value: resource.MustParse("7")},
		}}}
		if f != nil {
			f(s)
		}
	})
}

func withDevices(n int, f func(*resourcev1.Device)) func(*resourcev1.ResourceSlice) {
	return func(s *resourcev1.ResourceSlice) {
		s.Spec.Devices = nil
		for i := range n {
			d := v1Device(fmt.Sprintf("gpu-%d", i))
			if f != nil {
				f(&d)
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
	}
}

func device0(f func(*resourcev1.Device)) func(*resourcev1.ResourceSlice) {
	return func(s *resourcev1.ResourceSlice) { f(&s.Spec.Devices[0]) }
}

func setAttr(name string, a resourcev1.DeviceAttribute) func(*resourcev1.Device) {
	return func(d *resourcev1.Device) { d.Attributes[resourcev1.QualifiedName(name)] = a }
}

func consumes(sets ...string) func(*resourcev1.Device) {
	return func(d *resourcev1.Device) {
		for _, s := range sets {
			d.ConsumesCounters = append(d.ConsumesCounters, resourcev1.DeviceCounterConsumption{CounterSet: s, Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("10Gi")}}})
		}
	}
}

func taint(key string, effect resourcev1.DeviceTaintEffect) resourcev1.DeviceTaint {
	return resourcev1.DeviceTaint{Key: key, Effect: effect}
}

func oneTermSelector(terms int) *k8scorev1.NodeSelector {
	sel := &k8scorev1.NodeSelector{}
	for i := range terms {
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, k8scorev1.NodeSelectorTerm{MatchExpressions: []k8scorev1.NodeSelectorRequirement{
			{Key: "example.com/rack", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("r%d", i)}},
		}})
	}
	return sel
}

func counters(n int) map[string]resourcev1.Counter {
	m := map[string]resourcev1.Counter{}
	for i := range n {
		m[fmt.Sprintf("c%d", i)] = resourcev1.Counter{Value: resource.MustParse("1")}
	}
	return m
}

const (
	notInAllot  = "Forbidden: not supported by allot yet"
	gateOffFmt  = "Forbidden: feature gate %s is disabled (as in Kubernetes 1.37)"
	devicesPath = "spec.devices"
)

func gateOff(gate string) string { return fmt.Sprintf(gateOffFmt, gate) }

func TestValidateResourceSlice(t *testing.T) {
	d0 := "spec.devices[0]"
	for name, tc := range map[string]struct {
		slice *resourcev1.ResourceSlice
		want  []string
	}{
		"valid":                   {slice: v1Slice(nil)},
		"valid without devices":   {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Devices = nil })},
		"valid counter slice":     {slice: counterSlice(nil)},
		"name is a DNS subdomain": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Name = "Node_1" }), want: []string{"metadata.name: Invalid value"}},
		"no name":                 {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Name = "" }), want: []string{"metadata.name: Required value"}},

		// Driver: "Must be a DNS subdomain", DriverNameMaxLength 63.
		"no driver":          {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Driver = "" }), want: []string{"spec.driver: Required value"}},
		"driver not domain":  {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Driver = "gpu_example" }), want: []string{"spec.driver: Invalid value"}},
		"driver of 63 chars": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Driver = strings.Repeat("a", 51) + ".example.com" })},
		"driver of 64 chars": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Driver = strings.Repeat("a", 52) + ".example.com" }), want: []string{"spec.driver: Too long"}},

		// Pool: "It must not be longer than 253 characters and must
		// consist of one or more DNS sub-domains separated by slashes."
		"no pool name":       {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name = "" }), want: []string{"spec.pool.name: Required value"}},
		"pool of subdomains": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name = "cluster-a/node-1.example.com" })},
		"pool empty segment": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name = "a//b" }), want: []string{"spec.pool.name: Invalid value"}},
		"pool bad segment":   {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name = "a/B_c" }), want: []string{"spec.pool.name: Invalid value"}},
		"pool too long": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.Pool.Name = strings.Repeat(strings.Repeat("a", 100)+"/", 2) + strings.Repeat("a", 100)
		}), want: []string{"spec.pool.name: Too long"}},
		"negative generation": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Generation = -1 }), want: []string{"spec.pool.generation: Invalid value"}},
		"zero slice count":    {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.ResourceSliceCount = 0 }), want: []string{"spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"}},

		// "Exactly one of NodeName, NodeSelector, AllNodes, and
		// PerDeviceNodeSelection must be set."
		"no node selection": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = nil }), want: []string{"spec: Required value: must specify one of: `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"}},
		"two node selections": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.AllNodes = ptr(true) }),
			want: []string{"spec: Invalid value: may specify only one of"}},
		"allNodes":             {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.AllNodes = nil, ptr(true) })},
		"allNodes false":       {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.AllNodes = nil, ptr(false) }), want: []string{"spec.allNodes: Invalid value", "spec: Required value"}},
		"empty nodeName":       {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = ptr("") }), want: []string{"spec.nodeName: Invalid value"}},
		"nodeName not a name":  {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = ptr("Node 1") }), want: []string{"spec.nodeName: Invalid value"}},
		"nodeSelector":         {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, oneTermSelector(1) })},
		"nodeSelector 2 terms": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, oneTermSelector(2) }), want: []string{"spec.nodeSelector.nodeSelectorTerms: Invalid value: must have exactly one node selector term"}},
		"nodeSelector 0 terms": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, oneTermSelector(0) }), want: []string{"spec.nodeSelector.nodeSelectorTerms: Required value"}},
		"nodeSelector bad operator": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, oneTermSelector(1)
			s.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Operator = "Near"
		}), want: []string{"spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value"}},
		"perDeviceNodeSelection": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr(true)
			s.Spec.Devices[0].NodeName = ptr("node-1")
		})},
		"perDeviceNodeSelection false": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr(false) }),
			want: []string{"spec.perDeviceNodeSelection: Invalid value", "spec: Required value"}},

		// Device nodeName, nodeSelector, allNodes: "Must only be set if
		// Spec.PerDeviceNodeSelection is set to true. At most one of
		// NodeName, NodeSelector and AllNodes can be set."
		"device nodeName without perDevice": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.NodeName = ptr("node-1") })), want: []string{d0 + ".nodeName: Forbidden"}},
		"device allNodes without perDevice": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.AllNodes = ptr(true) })), want: []string{d0 + ".allNodes: Forbidden"}},
		"perDevice but device has none": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr(true) }),
			want: []string{d0 + ": Required value: must specify one of: `nodeName`, `nodeSelector`, `allNodes`"}},
		"perDevice device has two": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr(true)
			s.Spec.Devices[0].NodeName, s.Spec.Devices[0].AllNodes = ptr("node-1"), ptr(true)
		}), want: []string{d0 + ": Invalid value: may specify only one of"}},
		"perDevice device selector 2 terms": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr(true)
			s.Spec.Devices[0].NodeSelector = oneTermSelector(2)
		}), want: []string{d0 + ".nodeSelector.nodeSelectorTerms: Invalid value"}},

		// Devices: names are DNS labels, unique in the slice.
		"device without name":     {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Name = "" })), want: []string{d0 + ".name: Required value"}},
		"device name not a label": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Name = "gpu.0" })), want: []string{d0 + ".name: Invalid value"}},
		"duplicate device names": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Devices = append(s.Spec.Devices, v1Device("gpu-0")) }),
			want: []string{"spec.devices[1].name: Duplicate value"}},

		// "Must not have more than 128 entries. If any device uses taints
		// or consumes counters the limit is 64."
		"128 devices":              {slice: v1Slice(withDevices(128, nil))},
		"129 devices":              {slice: v1Slice(withDevices(129, nil)), want: []string{devicesPath + ": Too many: 129: must have at most 128 items"}},
		"64 devices with taints":   {slice: v1Slice(withDevices(64, func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a", "NoSchedule")} }))},
		"65 devices with taints":   {slice: v1Slice(withDevices(65, func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a", "NoSchedule")} })), want: []string{devicesPath + ": Too many: 65: must have at most 64 items"}},
		"64 devices with counters": {slice: v1Slice(withDevices(64, consumes("gpu-0-counters")))},
		"65 devices with counters": {slice: v1Slice(withDevices(65, consumes("gpu-0-counters"))), want: []string{devicesPath + ": Too many: 65: must have at most 64 items"}},
		"one tainted device lowers limit": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			withDevices(100, nil)(s)
			s.Spec.Devices[99].Taints = []resourcev1.DeviceTaint{taint("a", "None")}
		}), want: []string{devicesPath + ": Too many: 100: must have at most 64 items"}},

		// Attributes and capacities: "The maximum number of attributes and
		// capacities combined is 32." QualifiedName: C identifier <= 32,
		// optionally after a DNS subdomain <= 63 and "/".
		"32 attributes and capacities": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			for i := len(d.Attributes) + len(d.Capacity); i < 32; i++ {
				d.Attributes[resourcev1.QualifiedName(fmt.Sprintf("a%d", i))] = resourcev1.DeviceAttribute{BoolValue: ptr(true)}
			}
		}))},
		"33 attributes and capacities": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			for i := len(d.Attributes) + len(d.Capacity); i < 33; i++ {
				d.Capacity[resourcev1.QualifiedName(fmt.Sprintf("c%d", i))] = resourcev1.DeviceCapacity{Value: resource.MustParse("1")}
			}
		})), want: []string{d0 + ": Invalid value: has 33 attributes and capacities together, at most 32"}},
		"attribute name not identifier": {slice: v1Slice(device0(setAttr("1abc", resourcev1.DeviceAttribute{IntValue: ptr(int64(1))}))), want: []string{d0 + ".attributes[1abc]: Invalid value"}},
		"attribute id of 32":            {slice: v1Slice(device0(setAttr(strings.Repeat("a", 32), resourcev1.DeviceAttribute{IntValue: ptr(int64(1))})))},
		"attribute id of 33": {slice: v1Slice(device0(setAttr(strings.Repeat("a", 33), resourcev1.DeviceAttribute{IntValue: ptr(int64(1))}))),
			want: []string{d0 + ".attributes[" + strings.Repeat("a", 33) + "]: Invalid value: \"" + strings.Repeat("a", 33) + "\": the identifier must be no more than 32 characters"}},
		"attribute domain of 64": {slice: v1Slice(device0(setAttr(strings.Repeat("d", 52)+".example.com/x", resourcev1.DeviceAttribute{IntValue: ptr(int64(1))}))),
			want: []string{d0 + ".attributes[" + strings.Repeat("d", 52) + ".example.com/x]: Invalid value"}},
		"attribute domain not DNS": {slice: v1Slice(device0(setAttr("ex_ample.com/x", resourcev1.DeviceAttribute{IntValue: ptr(int64(1))}))), want: []string{d0 + ".attributes[ex_ample.com/x]: Invalid value"}},
		"attribute empty domain":   {slice: v1Slice(device0(setAttr("/x", resourcev1.DeviceAttribute{IntValue: ptr(int64(1))}))), want: []string{d0 + ".attributes[/x]: Invalid value"}},
		"attribute two slashes":    {slice: v1Slice(device0(setAttr("a.com/b/c", resourcev1.DeviceAttribute{IntValue: ptr(int64(1))}))), want: []string{d0 + ".attributes[a.com/b/c]: Invalid value"}},
		// "DeviceAttribute must have exactly one field set."
		"attribute without value": {slice: v1Slice(device0(setAttr("x", resourcev1.DeviceAttribute{}))), want: []string{d0 + ".attributes[x]: Invalid value: \"\": must specify one of"}},
		"attribute two values": {slice: v1Slice(device0(setAttr("x", resourcev1.DeviceAttribute{IntValue: ptr(int64(1)), BoolValue: ptr(true)}))),
			want: []string{d0 + ".attributes[x]: Invalid value: \"{int, bool}\": must specify exactly one of"}},
		"string of 64":       {slice: v1Slice(device0(setAttr("model", resourcev1.DeviceAttribute{StringValue: ptr(strings.Repeat("m", 64))})))},
		"string of 65":       {slice: v1Slice(device0(setAttr("model", resourcev1.DeviceAttribute{StringValue: ptr(strings.Repeat("m", 65))}))), want: []string{d0 + ".attributes[model].string: Too long"}},
		"version prerelease": {slice: v1Slice(device0(setAttr("driverVersion", resourcev1.DeviceAttribute{VersionValue: ptr("1.2.3-rc.1+build.5")})))},
		"version with v":     {slice: v1Slice(device0(setAttr("driverVersion", resourcev1.DeviceAttribute{VersionValue: ptr("v1.2.3")}))), want: []string{d0 + ".attributes[driverVersion].version: Invalid value"}},
		"version no patch":   {slice: v1Slice(device0(setAttr("driverVersion", resourcev1.DeviceAttribute{VersionValue: ptr("1.2")}))), want: []string{d0 + ".attributes[driverVersion].version: Invalid value"}},
		"version of 65": {slice: v1Slice(device0(setAttr("driverVersion", resourcev1.DeviceAttribute{VersionValue: ptr("1.2.3-" + strings.Repeat("a", 59))}))),
			want: []string{d0 + ".attributes[driverVersion].version: Too long"}},
		"capacity name invalid": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.Capacity["mem ory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("1")}
		})), want: []string{d0 + ".capacity[mem ory]: Invalid value"}},
		"negative capacity": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("-1")}
		})), want: []string{d0 + ".capacity[memory].value: Invalid value"}},

		// Taints: "The maximum number of taints is 16."; key "Must be a
		// label name."; value "Must be a label value."; effect required,
		// "Valid effects are None, NoSchedule and NoExecute".
		"taints NoSchedule and None": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.Taints = []resourcev1.DeviceTaint{taint("example.com/broken", "NoSchedule"), {Key: "maintenance", Value: "soon", Effect: "None"}}
		}))},
		"16 taints": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			for i := range 16 {
				d.Taints = append(d.Taints, taint(fmt.Sprintf("t%d", i), "None"))
			}
		}))},
		"17 taints": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			for i := range 17 {
				d.Taints = append(d.Taints, taint(fmt.Sprintf("t%d", i), "None"))
			}
		})), want: []string{d0 + ".taints: Too many: 17: must have at most 16 items"}},
		"taint without key": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("", "None")} })), want: []string{d0 + ".taints[0].key: Required value"}},
		"taint key invalid": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a b", "None")} })), want: []string{d0 + ".taints[0].key: Invalid value"}},
		"taint value invalid": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.Taints = []resourcev1.DeviceTaint{{Key: "a", Value: "a b", Effect: "None"}}
		})), want: []string{d0 + ".taints[0].value: Invalid value"}},
		"taint without effect": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a", "")} })), want: []string{d0 + ".taints[0].effect: Required value"}},
		"taint unknown effect": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a", "PreferNoSchedule")} })), want: []string{d0 + ".taints[0].effect: Unsupported value"}},
		"taint NoExecute":      {slice: v1Slice(device0(func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a", "NoExecute")} }))},

		// Counter sets: "Only one of Devices and SharedCounters can be
		// set"; at most 8 sets with unique DNS-label names, at most 32
		// counters each with DNS-label names.
		"counters and devices": {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.Devices = []resourcev1.Device{v1Device("gpu-0")} }),
			want: []string{"spec.sharedCounters: Forbidden"}},
		"counters and an empty device list": {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.Devices = []resourcev1.Device{} })},
		"empty compatibilityGroups": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			consumes("a")(d)
			d.ConsumesCounters[0].CompatibilityGroups = []string{}
		}))},
		"8 counter sets": {slice: counterSlice(func(s *resourcev1.ResourceSlice) {
			for i := 1; i < 8; i++ {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, resourcev1.CounterSet{Name: fmt.Sprintf("set-%d", i), Counters: counters(1)})
			}
		})},
		"9 counter sets": {slice: counterSlice(func(s *resourcev1.ResourceSlice) {
			for i := 1; i < 9; i++ {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, resourcev1.CounterSet{Name: fmt.Sprintf("set-%d", i), Counters: counters(1)})
			}
		}), want: []string{"spec.sharedCounters: Too many: 9: must have at most 8 items"}},
		"duplicate counter sets": {slice: counterSlice(func(s *resourcev1.ResourceSlice) {
			s.Spec.SharedCounters = append(s.Spec.SharedCounters, s.Spec.SharedCounters[0])
		}),
			want: []string{"spec.sharedCounters[1]: Duplicate value"}},
		"counter set without name": {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.SharedCounters[0].Name = "" }), want: []string{"spec.sharedCounters[0].name: Required value"}},
		"counter set name invalid": {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.SharedCounters[0].Name = "Set.0" }), want: []string{"spec.sharedCounters[0].name: Invalid value"}},
		"counter set empty":        {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.SharedCounters[0].Counters = nil }), want: []string{"spec.sharedCounters[0].counters: Required value"}},
		"32 counters":              {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.SharedCounters[0].Counters = counters(32) })},
		"33 counters":              {slice: counterSlice(func(s *resourcev1.ResourceSlice) { s.Spec.SharedCounters[0].Counters = counters(33) }), want: []string{"spec.sharedCounters[0].counters: Too many: 33: must have at most 32 items"}},
		"counter name invalid": {slice: counterSlice(func(s *resourcev1.ResourceSlice) {
			s.Spec.SharedCounters[0].Counters["Mem"] = resourcev1.Counter{Value: resource.MustParse("1")}
		}), want: []string{"spec.sharedCounters[0].counters: Invalid value"}},
		"negative counter": {slice: counterSlice(func(s *resourcev1.ResourceSlice) {
			s.Spec.SharedCounters[0].Counters["memory"] = resourcev1.Counter{Value: resource.MustParse("-1Gi")}
		}), want: []string{"spec.sharedCounters[0].counters[memory].value: Invalid value"}},

		// consumesCounters: the counter sets are in another slice of the
		// pool, so references are not resolved here. At most 2 entries,
		// one per set, at most 32 counters each.
		"consumes a set of another slice": {slice: v1Slice(device0(consumes("gpu-0-counters")))},
		"consumes from 2 sets":            {slice: v1Slice(device0(consumes("a", "b")))},
		"consumes from 3 sets":            {slice: v1Slice(device0(consumes("a", "b", "c"))), want: []string{d0 + ".consumesCounters: Too many: 3: must have at most 2 items"}},
		"consumes a set twice":            {slice: v1Slice(device0(consumes("a", "a"))), want: []string{d0 + ".consumesCounters[1]: Duplicate value"}},
		"consumes without set name":       {slice: v1Slice(device0(consumes(""))), want: []string{d0 + ".consumesCounters[0].counterSet: Required value"}},
		"consumes nothing": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: "a"}}
		})), want: []string{d0 + ".consumesCounters[0].counters: Required value"}},
		"consumes 33 counters": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: "a", Counters: counters(33)}}
		})), want: []string{d0 + ".consumesCounters[0].counters: Too many: 33: must have at most 32 items"}},

		// Gated fields.
		"compatibilityGroups (gate off)": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			consumes("a")(d)
			d.ConsumesCounters[0].CompatibilityGroups = []string{"full"}
		})), want: []string{d0 + ".consumesCounters[0].compatibilityGroups: " + gateOff("DRADeviceCompatibilityGroups")}},
		"list attribute (gate off)": {slice: v1Slice(device0(setAttr("models", resourcev1.DeviceAttribute{StringValues: []string{"a", "b"}}))),
			want: []string{d0 + ".attributes[models].strings: " + gateOff("DRAListTypeAttributes")}},
		"bindsToNode false": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.BindsToNode = ptr(false) }))},
		"bindsToNode":       {slice: v1Slice(device0(func(d *resourcev1.Device) { d.BindsToNode = ptr(true) }))},
		"bindingConditions": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.BindingConditions, d.BindingFailureConditions = []string{"Attached"}, []string{"AttachFailed"}
		}))},
		"allowMultipleAllocations false": {slice: v1Slice(device0(func(d *resourcev1.Device) { d.AllowMultipleAllocations = ptr(false) }))},
		"allowMultipleAllocations":       {slice: v1Slice(device0(func(d *resourcev1.Device) { d.AllowMultipleAllocations = ptr(true) }))},
		"requestPolicy without allowMultipleAllocations": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("80Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(resource.MustParse("1Gi"))}}
		})), want: []string{d0 + ".capacity[memory].requestPolicy: Forbidden: may only be set when `allowMultipleAllocations` is true"}},
		"nodeAllocatableResources (gate off)": {slice: v1Slice(device0(func(d *resourcev1.Device) {
			d.NodeAllocatableResources = map[k8scorev1.ResourceName]resourcev1.NodeAllocatableResource{"memory": {Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: ptr(resource.MustParse("1Gi"))}}}
		})), want: []string{d0 + ".nodeAllocatableResources: " + gateOff("DRANodeAllocatableResources")}},
		"partitionTypeAttribute (gate off)": {slice: v1Slice(func(s *resourcev1.ResourceSlice) {
			consumes("a")(&s.Spec.Devices[0])
			s.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("gpu.example.com/model"))
		}), want: []string{"spec.partitionTypeAttribute: " + gateOff("DRAPartitionableDevicesType")}},
		"skipNodeOperations (gate off)": {slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{"*"} }),
			want: []string{"spec.skipNodeOperations: " + gateOff("DRAOptionalNodeOperations")}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceSlice(tc.slice), tc.want...) })
	}
}

func TestValidateResourceSliceUpdate(t *testing.T) {
	withLists := func(s *resourcev1.ResourceSlice) {
		s.Spec.Devices[0].Attributes["models"] = resourcev1.DeviceAttribute{StringValues: []string{"a", "b"}}
	}
	for name, tc := range map[string]struct {
		old, new *resourcev1.ResourceSlice
		want     []string
	}{
		"unchanged": {old: v1Slice(nil), new: v1Slice(nil)},
		"add a device and bump the generation": {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices = append(s.Spec.Devices, v1Device("gpu-1"))
			s.Spec.Pool.Generation++
		})},
		"re-validates": {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Devices[0].Name = "" }), want: []string{"spec.devices[0].name: Required value"}},
		// "This field is immutable." on driver, pool.name and nodeName.
		"driver changes":    {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Driver = "nic.example.com" }), want: []string{"spec.driver: Invalid value: \"nic.example.com\": field is immutable"}},
		"pool name changes": {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Name = "node-2" }), want: []string{"spec.pool.name: Invalid value: \"node-2\": field is immutable"}},
		"nodeName changes":  {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = ptr("node-2") }), want: []string{"spec.nodeName: Invalid value: \"node-2\": field is immutable"}},
		"nodeName to allNodes": {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.AllNodes = nil, ptr(true) }),
			want: []string{"spec.nodeName: Invalid value: \"<unset>\": field is immutable"}},
		"nodeSelector may change": {
			old: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, oneTermSelector(1) }),
			new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.NodeName, s.Spec.AllNodes = nil, ptr(true) }),
		},
		"name changes": {old: v1Slice(nil), new: v1Slice(func(s *resourcev1.ResourceSlice) { s.Name = "other" }), want: []string{"metadata.name: Invalid value: \"other\": field is immutable"}},
		// A gate turned off keeps stored objects writable.
		"list attributes kept":  {old: v1Slice(withLists), new: v1Slice(func(s *resourcev1.ResourceSlice) { withLists(s); s.Spec.Pool.Generation++ })},
		"list attributes added": {old: v1Slice(nil), new: v1Slice(withLists), want: []string{"spec.devices[0].attributes[models].strings: " + gateOff("DRAListTypeAttributes")}},
		// ResourceSliceMaxAttributeValuesPerDevice counts list items.
		"49 attribute values": {old: v1Slice(withLists), new: v1Slice(func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[0].Attributes["models"] = resourcev1.DeviceAttribute{StringValues: make([]string, 49-len(s.Spec.Devices[0].Attributes))}
		}), want: []string{"spec.devices[0].attributes: Invalid value: has 49 values, at most 48"}},
		// "Validation must be prepared to allow unknown enums in stored
		// objects": an unchanged taint is not checked again.
		"stored unknown taint effect": {
			old: v1Slice(device0(func(d *resourcev1.Device) { d.Taints = []resourcev1.DeviceTaint{taint("a", "Future")} })),
			new: v1Slice(func(s *resourcev1.ResourceSlice) {
				s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{taint("a", "Future")}
				s.Spec.Pool.Generation++
			}),
		},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceSliceUpdate(tc.new, tc.old), tc.want...) })
	}
}

// TestV1OffGateFieldRules checks the rules of fields that are refused
// today, with their feature turned on: turning one on in V1Features must
// not let invalid values in.
func TestV1OffGateFieldRules(t *testing.T) {
	d0 := "spec.devices[0]"
	for name, tc := range map[string]struct {
		features []V1Feature
		slice    *resourcev1.ResourceSlice
		want     []string
	}{
		"list attributes": {features: []V1Feature{V1FeatureListTypeAttributes},
			slice: v1Slice(device0(setAttr("versions", resourcev1.DeviceAttribute{VersionValues: []string{"1.0.0", "2.0"}}))),
			want:  []string{d0 + ".attributes[versions].versions[1]: Invalid value"}},
		"list attribute too long string": {features: []V1Feature{V1FeatureListTypeAttributes},
			slice: v1Slice(device0(setAttr("models", resourcev1.DeviceAttribute{StringValues: []string{strings.Repeat("m", 65)}}))),
			want:  []string{d0 + ".attributes[models].strings[0]: Too long"}},
		"empty list attribute": {features: []V1Feature{V1FeatureListTypeAttributes},
			slice: v1Slice(device0(setAttr("models", resourcev1.DeviceAttribute{IntValue: ptr(int64(1)), StringValues: []string{}}))),
			want:  []string{d0 + ".attributes[models].strings: Required value"}},
		"65 devices with list attributes": {features: []V1Feature{V1FeatureListTypeAttributes},
			slice: v1Slice(withDevices(65, setAttr("models", resourcev1.DeviceAttribute{StringValues: []string{"a"}}))),
			want:  []string{devicesPath + ": Too many: 65: must have at most 64 items"}},
		"skipNodeOperations prepare only": {features: []V1Feature{V1FeatureOptionalNodeOperations},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{"NodePrepareResources"}
			}),
			want: []string{"spec.skipNodeOperations: Invalid value"}},
		"skipNodeOperations both": {features: []V1Feature{V1FeatureOptionalNodeOperations},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{"NodePrepareResources", "NodeUnprepareResources"}
			})},
		"skipNodeOperations unknown": {features: []V1Feature{V1FeatureOptionalNodeOperations},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) { s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{"Other"} }),
			want:  []string{"spec.skipNodeOperations[0]: Unsupported value"}},
		"partitionTypeAttribute missing on device": {features: []V1Feature{V1FeaturePartitionTypeAttribute},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				consumes("a")(&s.Spec.Devices[0])
				s.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("gpu.example.com/profile"))
			}),
			want: []string{d0 + ".attributes[gpu.example.com/profile]: Required value"}},
		"partitionTypeAttribute not a string": {features: []V1Feature{V1FeaturePartitionTypeAttribute},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				consumes("a")(&s.Spec.Devices[0])
				s.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("gpu.example.com/index"))
			}),
			want: []string{d0 + ".attributes[gpu.example.com/index]: Invalid value"}},
		"partitionTypeAttribute bare name in driver domain": {features: []V1Feature{V1FeaturePartitionTypeAttribute},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				consumes("a")(&s.Spec.Devices[0])
				s.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("gpu.example.com/model"))
			})},
		"partitionTypeAttribute not qualified": {features: []V1Feature{V1FeaturePartitionTypeAttribute},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				consumes("a")(&s.Spec.Devices[0])
				s.Spec.Devices[0].Attributes["gpu.example.com/model"] = resourcev1.DeviceAttribute{StringValue: ptr("x")}
				s.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("model"))
			}),
			want: []string{"spec.partitionTypeAttribute: Invalid value"}},
		"partitionTypeAttribute without partitions": {features: []V1Feature{V1FeaturePartitionTypeAttribute},
			slice: v1Slice(func(s *resourcev1.ResourceSlice) {
				s.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("gpu.example.com/model"))
			}),
			want: []string{"spec.partitionTypeAttribute: Invalid value"}},
		"compatibility groups": {features: []V1Feature{V1FeatureCompatibilityGroups},
			slice: v1Slice(device0(func(d *resourcev1.Device) {
				consumes("a")(d)
				d.ConsumesCounters[0].CompatibilityGroups = []string{"a", "a", "B"}
			})),
			want: []string{d0 + ".consumesCounters[0].compatibilityGroups: Too many"}},
		"binding conditions": {features: []V1Feature{V1FeatureBindingConditions},
			slice: v1Slice(device0(func(d *resourcev1.Device) {
				d.BindingConditions, d.BindingFailureConditions = []string{"Attached", "Attached"}, []string{"Attached"}
			})),
			want: []string{d0 + ".bindingConditions[1]: Duplicate value", d0 + ".bindingFailureConditions[0]: Invalid value: \"Attached\": must not also be listed"}},
		"binding conditions alone": {features: []V1Feature{V1FeatureBindingConditions},
			slice: v1Slice(device0(func(d *resourcev1.Device) { d.BindingConditions = []string{"Attached"} })),
			want:  []string{d0 + ".bindingFailureConditions: Required value"}},
		"node allocatable resources": {features: []V1Feature{V1FeatureNodeAllocatableResources},
			slice: v1Slice(device0(func(d *resourcev1.Device) {
				d.NodeAllocatableResources = map[k8scorev1.ResourceName]resourcev1.NodeAllocatableResource{
					"cpu":               {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr(resourcev1.QualifiedName("cores")), CapacityMultiplier: ptr(resource.MustParse("0"))}},
					"example.com/foo":   {Overhead: &resourcev1.NodeAllocatableOverhead{}},
					"memory":            {},
					"hugepages-2Mi":     {Mapping: &resourcev1.NodeAllocatableMapping{DeviceMultiplier: ptr(resource.MustParse("2"))}},
					"ephemeral-storage": {Overhead: &resourcev1.NodeAllocatableOverhead{PerContainer: ptr(resource.MustParse("-1"))}},
				}
			})),
			want: []string{
				d0 + ".nodeAllocatableResources[cpu].mapping.capacityKey: Not found",
				d0 + ".nodeAllocatableResources[cpu].mapping.capacityMultiplier: Invalid value",
				d0 + ".nodeAllocatableResources[example.com/foo]: Invalid value",
				d0 + ".nodeAllocatableResources[example.com/foo].overhead: Required value",
				d0 + ".nodeAllocatableResources[memory]: Required value",
				d0 + ".nodeAllocatableResources[ephemeral-storage].overhead.perContainer: Invalid value",
			}},
		"request policy": {features: []V1Feature{V1FeatureConsumableCapacity},
			slice: v1Slice(device0(func(d *resourcev1.Device) {
				d.AllowMultipleAllocations = ptr(true)
				q := resource.MustParse
				d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
					"okValues":  {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("2")), ValidValues: []resource.Quantity{q("1"), q("2"), q("4")}}},
					"okRange":   {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("3")), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("1")), Max: ptr(q("9")), Step: ptr(q("2"))}}},
					"both":      {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("1")), ValidValues: []resource.Quantity{q("1")}, ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("1"))}}},
					"noDefault": {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{ValidValues: []resource.Quantity{q("1")}}},
					"unsorted":  {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("3")), ValidValues: []resource.Quantity{q("2"), q("1"), q("20")}}},
					"offStep":   {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("2")), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("1")), Step: ptr(q("2"))}}},
					"noMin":     {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("2")), ValidRange: &resourcev1.CapacityRequestPolicyRange{}}},
					// Beyond int64 thousandths the step is checked exactly too.
					"hugeOffStep": {Value: q("1e30"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("1e20")), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("1")), Step: ptr(q("2e20"))}}},
					"hugeOnStep":  {Value: q("1e30"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("1e25")), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("0")), Step: ptr(q("1e20"))}}},
					"fineOffStep": {Value: q("10"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("1500u")), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("1m")), Step: ptr(q("1m"))}}},
				}
			})),
			want: []string{
				d0 + ".capacity[both].requestPolicy: Invalid value: may specify only one of",
				d0 + ".capacity[noDefault].requestPolicy.default: Required value",
				d0 + ".capacity[unsorted].requestPolicy.validValues[1]: Invalid value",
				d0 + ".capacity[unsorted].requestPolicy.validValues[2]: Invalid value: \"20\": must not be larger than the capacity",
				d0 + ".capacity[unsorted].requestPolicy.default: Invalid value: \"3\": must be one of `validValues`",
				d0 + ".capacity[offStep].requestPolicy.default: Invalid value: \"2\": must be `validRange.min` plus a multiple",
				d0 + ".capacity[noMin].requestPolicy.validRange.min: Required value",
				d0 + ".capacity[hugeOffStep].requestPolicy.default: Invalid value",
				d0 + ".capacity[fineOffStep].requestPolicy.default: Invalid value",
			}},
	} {
		t.Run(name, func(t *testing.T) {
			withV1Features(t, tc.features...)
			expectErrs(t, ValidateResourceSlice(tc.slice), tc.want...)
		})
	}
}

// withV1Features turns features on for one test: the change of a row
// that turning them on in allot would be.
func withV1Features(t *testing.T, fs ...V1Feature) {
	t.Helper()
	for _, f := range fs {
		saved := V1Features[f]
		on := saved
		on.Kubernetes, on.Allot = true, true
		V1Features[f] = on
		t.Cleanup(func() { V1Features[f] = saved })
	}
}
