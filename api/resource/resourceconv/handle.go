package resourceconv

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// V1HandleData is the resource handle data (the opaque string of a
// v1alpha2 resource handle, resource_handle in allot's DRA node API) of a
// v1 allocation's handle for a driver that has devices in pools other than
// the node's (network-attached devices): those results as the v1
// allocation lists them, in its JSON form, for instance
//
//	{"devices":[{"request":"net","driver":"fabric.example.com","pool":"rack-1","device":"fpga-0"}]}
//
// The driver decides what to do with them. The data is empty when every
// device of the driver is in the node's pool.
type V1HandleData struct {
	Devices []resourcev1.DeviceRequestAllocationResult `json:"devices"`
}

// DriverHandle is what a v1 allocation gives driver on node, in the form
// a driver of allot's DRA node API gets for a v1alpha2 claim allocated by
// allot's scheduler:
//
//   - sd.Partitionable.Instances: the driver's results in the pool named
//     like the node (node-local devices: seed instances projected as v1
//     devices), each device name mapped back to its instance ID by
//     SeedInstanceID ("gpu-0--halves--half-1" is "gpu-0/halves/half-1"),
//     in result order, each once; sd.NodeName is the node when there is
//     one, empty otherwise.
//   - sd.VendorClassParameters and sd.VendorClaimParameters: the opaque
//     configuration for the driver from the class (source FromClass) and
//     from the claim (FromClaim). Of the allocation's devices.config
//     entries with that source and opaque.driver == driver, those that
//     apply to a request of one of the driver's results (listed in the
//     entry's requests, by its name or its main request's, or the entry
//     lists none) count, and as in Kubernetes the last one that applies
//     to a request wins. A v1alpha2 handle carries one configuration per
//     source for all of the driver's devices, so the requests must agree
//     on it (compared as JSON values). The parameters are passed as they
//     are: the example gpu driver reads a GpuClaimParameters object
//     (apiVersion gpu.example.com/v1alpha1) from the claim's and a
//     GpuClassParameters object from the class's.
//   - data: the driver's results in other pools, and its shares of
//     devices that allow multiple allocations (results with a shareID,
//     whatever their pool: an instance ID cannot say which share, and one
//     claim may hold several shares of one device), as V1HandleData in
//     JSON, shareID and consumedCapacity included; "" when there are
//     none.
//
// An error says why the allocation cannot be expressed so (the requests
// disagree on the configuration); its text is a phrase that follows the
// claim's name ("claim ns/c has opaque configuration ..."). The node
// agent builds the handles of allot drivers with it, and the driver SDK
// (pkg/driver/kubeletplugin) in kubelet mode builds the same from the
// claim it reads, so a driver gets the same Claim either way.
func DriverHandle(a *resourcev1.AllocationResult, driver, node string) (sd *resourcev1alpha2.StructuredResourceHandle, data string, err error) {
	sd = &resourcev1alpha2.StructuredResourceHandle{Partitionable: &resourcev1alpha2.PartitionableAllocationResult{
		Instances: []resourcev1alpha2.AllocatedResourceInstance{}}}
	if a == nil {
		return sd, "", nil
	}
	var requests []string
	var remote []resourcev1.DeviceRequestAllocationResult
	for _, r := range a.Devices.Results {
		if r.Driver != driver {
			continue
		}
		if !slices.Contains(requests, r.Request) {
			requests = append(requests, r.Request)
		}
		if r.Pool != node || r.ShareID != nil {
			remote = append(remote, r)
			continue
		}
		in := resourcev1alpha2.AllocatedResourceInstance{ID: SeedInstanceID(r.Device)}
		if !slices.Contains(sd.Partitionable.Instances, in) {
			sd.Partitionable.Instances = append(sd.Partitionable.Instances, in)
		}
	}
	if len(sd.Partitionable.Instances) > 0 {
		sd.NodeName = node
	}
	if sd.VendorClassParameters, err = driverConfig(a.Devices.Config, driver, resourcev1.AllocationConfigSourceClass, requests); err != nil {
		return nil, "", err
	}
	if sd.VendorClaimParameters, err = driverConfig(a.Devices.Config, driver, resourcev1.AllocationConfigSourceClaim, requests); err != nil {
		return nil, "", err
	}
	if len(remote) > 0 {
		raw, err := json.Marshal(V1HandleData{Devices: remote})
		if err != nil {
			return nil, "", fmt.Errorf("has devices of driver %s that cannot be encoded: %w", driver, err)
		}
		data = string(raw)
	}
	return sd, data, nil
}

// driverConfig returns the opaque parameters of source for driver that
// apply to requests (see DriverHandle), or an error when the requests
// disagree on them.
func driverConfig(configs []resourcev1.DeviceAllocationConfiguration, driver string, source resourcev1.AllocationConfigSource, requests []string) (*runtime.RawExtension, error) {
	var chosen *runtime.RawExtension
	for i, req := range requests {
		var applies *runtime.RawExtension
		for j := range configs {
			c := &configs[j]
			if c.Source == source && c.Opaque != nil && c.Opaque.Driver == driver && ConfigApplies(c.Requests, req) {
				applies = &c.Opaque.Parameters
			}
		}
		if i == 0 {
			chosen = applies
			continue
		}
		if !sameParameters(chosen, applies) {
			return nil, fmt.Errorf("has opaque configuration from its %s for driver %s that differs between requests %q and %q, "+
				"which the node agent cannot prepare: a v1alpha2 resource handle carries one configuration per driver",
				sourceWord(source), driver, requests[0], req)
		}
	}
	if chosen == nil || len(chosen.Raw) == 0 {
		return nil, nil
	}
	return &runtime.RawExtension{Raw: slices.Clone(chosen.Raw)}, nil
}

func sourceWord(s resourcev1.AllocationConfigSource) string {
	if s == resourcev1.AllocationConfigSourceClass {
		return "class"
	}
	return "claim"
}

// ConfigApplies reports whether a devices.config entry listing requests
// applies to a result of request ("main" or "main/subrequest"): it lists
// none, the request, or its main request.
func ConfigApplies(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	return slices.Contains(requests, request) || slices.Contains(requests, MainRequest(request))
}

// MainRequest is the main request of a result's request name: "gpu" for
// both "gpu" and the subrequest "gpu/large".
func MainRequest(request string) string {
	main, _, _ := strings.Cut(request, "/")
	return main
}

// sameParameters compares two opaque parameters as JSON values.
func sameParameters(a, b *runtime.RawExtension) bool {
	if a == nil || b == nil {
		return a == b
	}
	var va, vb any
	if json.Unmarshal(a.Raw, &va) != nil || json.Unmarshal(b.Raw, &vb) != nil {
		return string(a.Raw) == string(b.Raw)
	}
	return reflect.DeepEqual(va, vb)
}
