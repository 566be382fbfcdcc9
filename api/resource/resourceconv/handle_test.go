package resourceconv

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

const (
	gpuDriver    = "gpu.example.com"
	fabricDriver = "fabric.example.com"
	node         = "node-1"
)

func opaque(source resourcev1.AllocationConfigSource, driver string, requests []string, params string) resourcev1.DeviceAllocationConfiguration {
	return resourcev1.DeviceAllocationConfiguration{Source: source, Requests: requests, DeviceConfiguration: resourcev1.DeviceConfiguration{
		Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
}

func seedResult(request, driver, id string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: node, Device: SeedDeviceName(id)}
}

func ids(sd *resourcev1alpha2.StructuredResourceHandle) []string {
	var out []string
	for _, in := range sd.Partitionable.Instances {
		out = append(out, in.ID)
	}
	return out
}

func TestDriverHandle(t *testing.T) {
	const classParams = `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GpuClassParameters","initCommand":["/bin/true"]}`
	const claimParams = `{"apiVersion":"gpu.example.com/v1alpha1","kind":"GpuClaimParameters","spec":{"sharing":{"strategy":"TimeSliced"}}}`

	t.Run("seed devices, configuration and network-attached devices", func(t *testing.T) {
		remote := resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuDriver, Pool: "shared-gpus", Device: "gpu-7"}
		a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{
				seedResult("gpu", gpuDriver, "gpu-0"), seedResult("gpu", gpuDriver, "gpu-1/halves/half-0"), seedResult("gpu", gpuDriver, "gpu-0"),
				{Request: "net", Driver: fabricDriver, Pool: "rack-1", Device: "fpga-0"}, remote,
			},
			Config: []resourcev1.DeviceAllocationConfiguration{
				opaque(resourcev1.AllocationConfigSourceClass, gpuDriver, nil, classParams),
				opaque(resourcev1.AllocationConfigSourceClaim, fabricDriver, nil, `{"kind":"Other"}`),
				opaque(resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"gpu"}, claimParams),
			},
		}}
		sd, data, err := DriverHandle(a, gpuDriver, node)
		if err != nil {
			t.Fatal(err)
		}
		want := &resourcev1alpha2.StructuredResourceHandle{
			VendorClassParameters: &runtime.RawExtension{Raw: []byte(classParams)},
			VendorClaimParameters: &runtime.RawExtension{Raw: []byte(claimParams)},
			NodeName:              node,
			Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{
				{ID: "gpu-0"}, {ID: "gpu-1/halves/half-0"}}},
		}
		if !reflect.DeepEqual(sd, want) {
			t.Errorf("handle %+v\nwant %+v", sd, want)
		}
		var d V1HandleData
		if err := json.Unmarshal([]byte(data), &d); err != nil || len(d.Devices) != 1 || !reflect.DeepEqual(d.Devices[0], remote) {
			t.Errorf("data %q (%v), want the device of pool shared-gpus", data, err)
		}

		sd, data, err = DriverHandle(a, fabricDriver, node)
		if err != nil || sd.NodeName != "" || len(ids(sd)) != 0 || sd.VendorClassParameters != nil ||
			sd.VendorClaimParameters == nil || string(sd.VendorClaimParameters.Raw) != `{"kind":"Other"}` || !strings.Contains(data, "fpga-0") {
			t.Errorf("fabric handle %+v, data %q, %v: want no node, no instances, its own claim configuration, its device in data", sd, data, err)
		}
	})

	t.Run("shares go in data with their share IDs, even in the node's pool", func(t *testing.T) {
		one, two := types.UID("00000000-0000-4000-8000-000000000001"), types.UID("00000000-0000-4000-8000-000000000002")
		shares := []resourcev1.DeviceRequestAllocationResult{
			{Request: "a", Driver: gpuDriver, Pool: node, Device: "nic-0", ShareID: &one,
				ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}},
			{Request: "b", Driver: gpuDriver, Pool: node, Device: "nic-0", ShareID: &two,
				ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("20G")}},
		}
		a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: append([]resourcev1.DeviceRequestAllocationResult{seedResult("a", gpuDriver, "gpu-0")}, shares...)}}
		sd, data, err := DriverHandle(a, gpuDriver, node)
		if err != nil || !slices.Equal(ids(sd), []string{"gpu-0"}) {
			t.Fatalf("handle %+v, %v: want the seed instance only", sd, err)
		}
		var d V1HandleData
		if err := json.Unmarshal([]byte(data), &d); err != nil || len(d.Devices) != 2 {
			t.Fatalf("data %q (%v), want both shares", data, err)
		}
		for i := range shares {
			got := d.Devices[i]
			bw := got.ConsumedCapacity["bandwidth"]
			if got.ShareID == nil || *got.ShareID != *shares[i].ShareID || bw.Cmp(shares[i].ConsumedCapacity["bandwidth"]) != 0 {
				t.Errorf("share %d: %+v, want %+v", i, got, shares[i])
			}
		}
	})

	t.Run("the last entry that applies wins; subrequests take their request's", func(t *testing.T) {
		a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{seedResult("gpu/large", gpuDriver, "gpu-0")},
			Config: []resourcev1.DeviceAllocationConfiguration{
				opaque(resourcev1.AllocationConfigSourceClaim, gpuDriver, nil, `{"n":"first"}`),
				opaque(resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"gpu"}, `{"n":"second"}`),
				opaque(resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"other"}, `{"n":"not mine"}`),
				opaque(resourcev1.AllocationConfigSourceClass, gpuDriver, []string{"gpu/small"}, `{"n":"other subrequest"}`),
			},
		}}
		sd, _, err := DriverHandle(a, gpuDriver, node)
		if err != nil {
			t.Fatal(err)
		}
		if sd.VendorClaimParameters == nil || string(sd.VendorClaimParameters.Raw) != `{"n":"second"}` || sd.VendorClassParameters != nil {
			t.Fatalf("parameters claim %v class %v", sd.VendorClaimParameters, sd.VendorClassParameters)
		}
	})

	t.Run("requests must agree on the configuration", func(t *testing.T) {
		a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{seedResult("a", gpuDriver, "gpu-0"), seedResult("b", gpuDriver, "gpu-1")},
			Config: []resourcev1.DeviceAllocationConfiguration{
				opaque(resourcev1.AllocationConfigSourceClass, gpuDriver, []string{"a"}, `{"x":1,"y":2}`),
				opaque(resourcev1.AllocationConfigSourceClass, gpuDriver, []string{"b"}, `{ "y": 2, "x": 1 }`),
			},
		}}
		if _, _, err := DriverHandle(a, gpuDriver, node); err != nil {
			t.Fatalf("the same class configuration for both requests: %v", err)
		}
		a.Devices.Config = append(a.Devices.Config, opaque(resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"a"}, `{"only":"a"}`))
		sd, _, err := DriverHandle(a, gpuDriver, node)
		if sd != nil || err == nil || !strings.HasPrefix(err.Error(), `has opaque configuration from its claim for driver `+gpuDriver+` that differs between requests "a" and "b"`) {
			t.Fatalf("%v, %v: want the disagreement named, as a phrase after the claim's name", sd, err)
		}
	})

	t.Run("no allocation, no devices", func(t *testing.T) {
		for _, a := range []*resourcev1.AllocationResult{nil, {}} {
			sd, data, err := DriverHandle(a, gpuDriver, node)
			if err != nil || data != "" || sd.NodeName != "" || sd.Partitionable == nil || len(sd.Partitionable.Instances) != 0 {
				t.Errorf("DriverHandle(%v) = %+v, %q, %v", a, sd, data, err)
			}
		}
	})
}

func TestConfigApplies(t *testing.T) {
	for _, tc := range []struct {
		requests []string
		request  string
		want     bool
	}{
		{nil, "gpu", true},
		{[]string{"gpu"}, "gpu", true},
		{[]string{"gpu"}, "gpu/large", true},
		{[]string{"gpu/large"}, "gpu/large", true},
		{[]string{"gpu/small"}, "gpu/large", false},
		{[]string{"net"}, "gpu", false},
	} {
		if got := ConfigApplies(tc.requests, tc.request); got != tc.want {
			t.Errorf("ConfigApplies(%q, %q) = %v, want %v", tc.requests, tc.request, got, tc.want)
		}
	}
	if got := slices.Compact([]string{MainRequest("gpu/large"), MainRequest("gpu")}); len(got) != 1 || got[0] != "gpu" {
		t.Errorf("MainRequest: %q", got)
	}
}
