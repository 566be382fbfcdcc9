package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

// The profiles: what the driver publishes and what a prepared device puts
// in a container's environment. They have the shapes of the example DRA
// driver's gpu, net and cpu profiles (kubernetes-sigs/dra-example-driver),
// which its demos use; the names and quantities are this driver's own.
const (
	profileGPU = "gpu"
	profileNet = "net"
	profileCPU = "cpu"
)

// The conditions a --binding-conditions GPU waits for, and the one that
// fails its binding.
const (
	bindingCondition        = "BindingConditions"
	bindingFailureCondition = "BindingFailureConditions"
)

// GPU quantities: each GPU's memory (as before the profiles) and compute.
const (
	gpuMemory  = deviceMemory
	gpuCompute = "100"
)

// inventory is one profile with its parameters.
type inventory struct {
	profile string
	// gpu
	gpus, partitions    int
	multipleAllocations bool
	bindingConditions   bool
	// net
	nics int
	// cpu
	numaNodes, cpusPerNUMA int
	driver                 string // the cpu capacity is named after it
}

func (c config) inventory() inventory {
	return inventory{profile: c.profile, gpus: c.gpus, partitions: c.gpuPartitions, multipleAllocations: c.gpuMultipleAllocations,
		bindingConditions: c.bindingConditions, nics: c.nics, numaNodes: c.numaNodes, cpusPerNUMA: c.cpusPerNUMA, driver: c.driverName}
}

// cpuCapacity is the name of the cpu profile's capacity: DRIVER/cpu.
func (inv inventory) cpuCapacity() resourceapi.QualifiedName {
	return resourceapi.QualifiedName(inv.driver + "/cpu")
}

// resources is what the driver publishes: one pool named after the node,
// in one slice, or two with the partitioned GPUs' shared counters.
func (inv inventory) resources(node string) resourceslice.DriverResources {
	devs, counters := inv.devices(node)
	slices := []resourceslice.Slice{{Devices: devs}}
	if len(counters) > 0 {
		slices = []resourceslice.Slice{{SharedCounters: counters}, {Devices: devs}}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: {Slices: slices}}}
}

// devices lists the profile's devices and shared counters.
func (inv inventory) devices(node string) ([]resourceapi.Device, []resourceapi.CounterSet) {
	switch inv.profile {
	case profileNet:
		return inv.netDevices(), nil
	case profileCPU:
		return inv.cpuDevices(), nil
	}
	if inv.partitions == 0 && !inv.multipleAllocations && !inv.bindingConditions {
		return devices(node, inv.gpus), nil // the plain GPUs, as before the profiles
	}
	return inv.gpuDevices(node)
}

// gpuDevices are the gpu profile's GPUs with its options: whole GPUs, or
// with --gpu-partitions N each GPU's N partitions and the full GPU, all
// consuming the GPU's counter set gpu-I-counters; shareable with
// --gpu-allow-multiple-allocations (memory and compute in 1Gi and 1
// steps, the whole by default); waiting for binding conditions with
// --binding-conditions.
func (inv inventory) gpuDevices(node string) ([]resourceapi.Device, []resourceapi.CounterSet) {
	memory, compute := resource.MustParse(gpuMemory), resource.MustParse(gpuCompute)
	var devs []resourceapi.Device
	var counters []resourceapi.CounterSet
	add := func(name string, attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, mem, cmp resource.Quantity, set string) {
		d := resourceapi.Device{Name: name, Attributes: attrs,
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory":  inv.shareable(mem, "1Gi"),
				"compute": inv.shareable(cmp, "1"),
			}}
		if inv.multipleAllocations {
			d.AllowMultipleAllocations = ptr.To(true)
		}
		if set != "" {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set,
				Counters: map[string]resourceapi.Counter{"memory": {Value: mem}, "compute": {Value: cmp}}}}
		}
		if inv.bindingConditions {
			d.BindingConditions = []string{bindingCondition}
			d.BindingFailureConditions = []string{bindingFailureCondition}
		}
		devs = append(devs, d)
	}
	for i := range inv.gpus {
		attrs := func(extra map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To(deviceModel)},
				"uuid":  {StringValue: ptr.To(deviceUUID(node, i))},
			}
			for k, v := range extra {
				a[k] = v
			}
			return a
		}
		if inv.partitions == 0 {
			add(deviceName(i), attrs(nil), memory, compute, "")
			continue
		}
		set := fmt.Sprintf("gpu-%d-counters", i)
		counters = append(counters, resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{
			"memory": {Value: memory}, "compute": {Value: compute}}})
		pmem := *resource.NewQuantity(memory.Value()/int64(inv.partitions), resource.BinarySI)
		pcmp := *resource.NewQuantity(compute.Value()/int64(inv.partitions), resource.DecimalSI)
		for j := range inv.partitions {
			add(fmt.Sprintf("gpu-%d-partition-%d", i, j), attrs(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"partition": {IntValue: ptr.To(int64(j))}, "partitionable": {BoolValue: ptr.To(true)}}), pmem, pcmp, set)
		}
		add(fmt.Sprintf("gpu-%d-full", i), attrs(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"partitionable": {BoolValue: ptr.To(true)}, "full": {BoolValue: ptr.To(true)}}), memory, compute, set)
	}
	return devs, counters
}

// shareable is a GPU capacity of value: with --gpu-allow-multiple-allocations
// a request takes step-aligned amounts from step up to the whole, the
// whole by default.
func (inv inventory) shareable(value resource.Quantity, step string) resourceapi.DeviceCapacity {
	c := resourceapi.DeviceCapacity{Value: value}
	if inv.multipleAllocations {
		s := resource.MustParse(step)
		c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(value.DeepCopy()),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(s.DeepCopy()), Step: ptr.To(s.DeepCopy()), Max: ptr.To(value.DeepCopy())}}
	}
	return c
}

// netDevices are the net profile's NICs nic-I, each shared by many
// claims: one virtual function each (vfs, always 1 of 100) and a share
// of the ingress and egress bandwidth (100G; 1G by default; 100M..100G
// in 1M steps).
func (inv inventory) netDevices() []resourceapi.Device {
	bandwidth := func() resourceapi.DeviceCapacity {
		return resourceapi.DeviceCapacity{Value: resource.MustParse("100G"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default: ptr.To(resource.MustParse("1G")),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("100M")),
				Max: ptr.To(resource.MustParse("100G")), Step: ptr.To(resource.MustParse("1M"))},
		}}
	}
	var devs []resourceapi.Device
	for i := range inv.nics {
		devs = append(devs, resourceapi.Device{
			Name:                     "nic-" + strconv.Itoa(i),
			AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To("UPSTREAM-NIC")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"vfs": {Value: resource.MustParse("100"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: ptr.To(resource.MustParse("1")), ValidValues: []resource.Quantity{resource.MustParse("1")}}},
				"ingressBandwidth": bandwidth(),
				"egressBandwidth":  bandwidth(),
			},
		})
	}
	return devs
}

// cpuDevices are the cpu profile's NUMA nodes numa-I, each shared by many
// claims, with --cpus-per-numa-node CPUs as the capacity DRIVER/cpu.
func (inv inventory) cpuDevices() []resourceapi.Device {
	var devs []resourceapi.Device
	for i := range inv.numaNodes {
		devs = append(devs, resourceapi.Device{
			Name:                     "numa-" + strconv.Itoa(i),
			AllowMultipleAllocations: ptr.To(true),
			Attributes:               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"numaNodeID": {IntValue: ptr.To(int64(i))}},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				inv.cpuCapacity(): {Value: *resource.NewQuantity(int64(inv.cpusPerNUMA), resource.DecimalSI)},
			},
		})
	}
	return devs
}

// deviceNames are the names of the devices the profile publishes, in
// order (for health reports).
func (inv inventory) deviceNames(node string) []string {
	devs, _ := inv.devices(node)
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	return out
}

// deviceEnv is what a container sees of one allocated device: for a GPU
// GPU_DEVICE_<I>=<device> (partitions: GPU_DEVICE_<I>_PARTITION_<J>), for
// a NIC NET_DEVICE_<I>=<device>, for a NUMA node CPU_DEVICE_<I>=<device>;
// then, for a share of a device, <PREFIX>_SHARE=<shareID> and one
// <PREFIX>_<CAPACITY>=<amount> per consumed capacity (upper case,
// non-alphanumerics as _). ok is false for a device the profile does not
// publish.
func (inv inventory) deviceEnv(node string, r resourceapi.DeviceRequestAllocationResult) ([]string, bool) {
	prefix, ok := inv.envPrefix(node, r.Device)
	if !ok {
		return nil, false
	}
	env := []string{prefix + "=" + r.Device}
	if r.ShareID != nil {
		env = append(env, prefix+"_SHARE="+string(*r.ShareID))
	}
	for _, k := range slices.Sorted(maps.Keys(r.ConsumedCapacity)) {
		q := r.ConsumedCapacity[k]
		env = append(env, prefix+"_"+envName(string(k))+"="+q.String())
	}
	return env, true
}

// envPrefix is the variable naming a published device.
func (inv inventory) envPrefix(node, device string) (string, bool) {
	known := false
	for _, n := range inv.deviceNames(node) {
		if n == device {
			known = true
			break
		}
	}
	if !known {
		return "", false
	}
	switch {
	case strings.HasPrefix(device, "nic-"):
		return "NET_DEVICE_" + strings.TrimPrefix(device, "nic-"), true
	case strings.HasPrefix(device, "numa-"):
		return "CPU_DEVICE_" + strings.TrimPrefix(device, "numa-"), true
	}
	rest := strings.TrimPrefix(device, devicePrefix)
	if gpu, part, ok := strings.Cut(rest, "-partition-"); ok {
		return "GPU_DEVICE_" + gpu + "_PARTITION_" + part, true
	}
	return "GPU_DEVICE_" + strings.TrimSuffix(rest, "-full"), true
}

// envName is a capacity's name as part of a variable: upper case, every
// other character than letters and digits as _.
func envName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, s)
}
