package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"allot.dev/allot/api/validation"
)

// asSlices turns a profile's pool into the ResourceSlices the library
// would write, for allot's validation.
func asSlices(inv inventory) []*resourceapi.ResourceSlice {
	pool := inv.resources(testNode).Pools[testNode]
	var out []*resourceapi.ResourceSlice
	for i, s := range pool.Slices {
		out = append(out, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)},
			Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To(testNode),
				Pool:    resourceapi.ResourcePool{Name: testNode, ResourceSliceCount: int64(len(pool.Slices))},
				Devices: s.Devices, SharedCounters: s.SharedCounters}})
	}
	return out
}

func TestGPUPartitions(t *testing.T) {
	inv := inventory{profile: profileGPU, gpus: 2, partitions: 2}
	pool := inv.resources(testNode).Pools[testNode]
	if len(pool.Slices) != 2 || len(pool.Slices[0].SharedCounters) != 2 || len(pool.Slices[1].Devices) != 6 {
		t.Fatalf("want a counters slice (2 sets) and a devices slice (6 devices), got %+v", pool.Slices)
	}
	want := []string{"gpu-0-partition-0", "gpu-0-partition-1", "gpu-0-full", "gpu-1-partition-0", "gpu-1-partition-1", "gpu-1-full"}
	if got := inv.deviceNames(testNode); !slices.Equal(got, want) {
		t.Fatalf("devices %v, want %v", got, want)
	}
	part := pool.Slices[1].Devices[0]
	if c := part.ConsumesCounters; len(c) != 1 || c[0].CounterSet != "gpu-0-counters" || qstr(c[0].Counters["memory"].Value) != "8Gi" ||
		qstr(c[0].Counters["compute"].Value) != "50" {
		t.Errorf("partition consumes %+v, want half of gpu-0-counters", c)
	}
	for _, s := range asSlices(inv) {
		if errs := validation.ValidateResourceSlice(s); len(errs) > 0 {
			t.Errorf("slice %s: %v", s.Name, errs.ToAggregate())
		}
	}
	for dev, prefix := range map[string]string{"gpu-1-partition-1": "GPU_DEVICE_1_PARTITION_1", "gpu-0-full": "GPU_DEVICE_0"} {
		if got, ok := inv.envPrefix(testNode, dev); !ok || got != prefix {
			t.Errorf("envPrefix(%s) = %q %v, want %q", dev, got, ok, prefix)
		}
	}
}

func TestShareableProfiles(t *testing.T) {
	gpu := inventory{profile: profileGPU, gpus: 1, multipleAllocations: true, bindingConditions: true}
	d := gpu.resources(testNode).Pools[testNode].Slices[0].Devices[0]
	if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || d.Capacity["memory"].RequestPolicy == nil ||
		d.Capacity["memory"].RequestPolicy.ValidRange.Step.String() != "1Gi" {
		t.Errorf("shareable GPU: %+v", d)
	}
	if !slices.Equal(d.BindingConditions, []string{bindingCondition}) || !slices.Equal(d.BindingFailureConditions, []string{bindingFailureCondition}) {
		t.Errorf("binding conditions %v / %v", d.BindingConditions, d.BindingFailureConditions)
	}
	nic := inventory{profile: profileNet, nics: 2}.resources(testNode).Pools[testNode].Slices[0].Devices
	if len(nic) != 2 || nic[1].Name != "nic-1" || !*nic[1].AllowMultipleAllocations || qstr(nic[1].Capacity["ingressBandwidth"].Value) != "100G" ||
		!slices.Equal(nic[1].Capacity["vfs"].RequestPolicy.ValidValues, []resource.Quantity{resource.MustParse("1")}) {
		t.Errorf("NICs %+v", nic)
	}
	cpu := inventory{profile: profileCPU, numaNodes: 2, cpusPerNUMA: 8, driver: testDriver}
	numa := cpu.resources(testNode).Pools[testNode].Slices[0].Devices
	if len(numa) != 2 || numa[0].Name != "numa-0" || qstr(numa[0].Capacity[cpu.cpuCapacity()].Value) != "8" {
		t.Errorf("NUMA nodes %+v", numa)
	}
}

// A share of a device gets its own CDI device (two requests of a claim
// may share one NIC), the share ID and what it consumes in its
// environment, and the share ID in the device returned to the kubelet.
func TestPrepareShares(t *testing.T) {
	inv := inventory{profile: profileNet, nics: 1}
	share := func(id string, rate string) resourceapi.DeviceRequestAllocationResult {
		uid := types.UID(id)
		return resourceapi.DeviceRequestAllocationResult{Request: "nic-" + id[:1], Driver: testDriver, Pool: testNode, Device: "nic-0",
			ShareID: &uid, ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{
				"ingressBandwidth": resource.MustParse(rate), "vfs": resource.MustParse("1")}}
	}
	claim := testClaim()
	claim.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{
		share("a1b2c3d4-0000-4000-8000-000000000001", "10G"), share("b1b2c3d4-0000-4000-8000-000000000002", "20G")}
	spec, devs, err := claimSpec(testDriver, testNode, inv, claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Devices) != 2 || spec.Devices[0].Name == spec.Devices[1].Name {
		t.Fatalf("want two CDI devices, one per share: %+v", spec.Devices)
	}
	env := strings.Join(spec.Devices[1].ContainerEdits.Env, " ")
	for _, w := range []string{"NET_DEVICE_0=nic-0", "NET_DEVICE_0_SHARE=b1b2c3d4-0000-4000-8000-000000000002", "NET_DEVICE_0_INGRESSBANDWIDTH=20G", "NET_DEVICE_0_VFS=1"} {
		if !strings.Contains(env, w) {
			t.Errorf("env %q lacks %q", env, w)
		}
	}
	if devs[0].ShareID == nil || string(*devs[0].ShareID) != "a1b2c3d4-0000-4000-8000-000000000001" {
		t.Errorf("device returned without its share ID: %+v", devs[0])
	}
}

func qstr(q resource.Quantity) string { return q.String() }
