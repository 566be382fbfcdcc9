package dra

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// The versions a claim is stored as (claimRecord.Version).
var (
	versionV1alpha2 = resourcev1alpha2.SchemeGroupVersion.String()
	versionV1       = resourcev1.SchemeGroupVersion.String()
)

// v1HandleData is the resource handle data (drapb.Claim.resource_handle)
// of a resource.k8s.io/v1 claim's handle for a driver that has devices in
// pools other than this node's (network-attached devices): those results
// as the v1 allocation lists them, in its JSON form, for instance
//
//	{"devices":[{"request":"net","driver":"fabric.example.com","pool":"rack-1","device":"fpga-0"}]}
//
// The driver decides what to do with them. The data is empty when every
// device of the driver is in this node's pool.
type v1HandleData struct {
	Devices []resourcev1.DeviceRequestAllocationResult `json:"devices"`
}

// v1Form returns the v1alpha2 form in which the Manager checks, prepares
// and records a v1 claim: resourceconv.ClaimToV1alpha2 (metadata,
// reservedFor, availableOnNodes from the allocation's nodeSelector, one
// resource handle per driver of the results), each handle's structured
// data rebuilt for this node by v1DriverHandle. A driver then gets what
// it would get for an equivalent v1alpha2 claim allocated by allot's
// scheduler. problem (a phrase to follow the claim's name) is set when
// the allocation cannot be expressed so. The handles of drivers for which
// kubelet reports true (they speak the kubelet's DRA API and read the
// claim themselves) are left without data.
func v1Form(claim *resourcev1.ResourceClaim, node string, kubelet func(driver string) bool) (form *resourcev1alpha2.ResourceClaim, problem string) {
	form = resourceconv.ClaimToV1alpha2(claim)
	a := claim.Status.Allocation
	if a == nil {
		return form, ""
	}
	for i := range form.Status.Allocation.ResourceHandles {
		rh := &form.Status.Allocation.ResourceHandles[i]
		if kubelet != nil && kubelet(rh.DriverName) {
			rh.StructuredData, rh.Data = nil, ""
			continue
		}
		sd, data, problem := v1DriverHandle(a, rh.DriverName, node)
		if problem != "" {
			return nil, problem
		}
		rh.StructuredData, rh.Data = sd, data
	}
	return form, ""
}

// v1DriverHandle is a v1 allocation's handle for driver on node:
//
//   - StructuredData.Partitionable.Instances: the driver's results in the
//     pool named like the node (node-local devices: seed instances
//     projected as v1 devices), each device name mapped back to its
//     instance ID by resourceconv.SeedInstanceID ("gpu-0--halves--half-1"
//     is "gpu-0/halves/half-1"), in result order, each once; NodeName is
//     the node when there is one, empty otherwise.
//   - StructuredData.VendorClassParameters and VendorClaimParameters: the
//     opaque configuration for the driver from the class (source
//     FromClass) and from the claim (FromClaim); see v1DriverConfig.
//   - data: the driver's results in other pools, as v1HandleData.
func v1DriverHandle(a *resourcev1.AllocationResult, driver, node string) (*resourcev1alpha2.StructuredResourceHandle, string, string) {
	sd := &resourcev1alpha2.StructuredResourceHandle{Partitionable: &resourcev1alpha2.PartitionableAllocationResult{
		Instances: []resourcev1alpha2.AllocatedResourceInstance{}}}
	var requests []string
	var remote []resourcev1.DeviceRequestAllocationResult
	for _, r := range a.Devices.Results {
		if r.Driver != driver {
			continue
		}
		if !slices.Contains(requests, r.Request) {
			requests = append(requests, r.Request)
		}
		if r.Pool != node {
			remote = append(remote, r)
			continue
		}
		in := resourcev1alpha2.AllocatedResourceInstance{ID: resourceconv.SeedInstanceID(r.Device)}
		if !slices.Contains(sd.Partitionable.Instances, in) {
			sd.Partitionable.Instances = append(sd.Partitionable.Instances, in)
		}
	}
	if len(sd.Partitionable.Instances) > 0 {
		sd.NodeName = node
	}
	var problem string
	if sd.VendorClassParameters, problem = v1DriverConfig(a.Devices.Config, driver, resourcev1.AllocationConfigSourceClass, requests); problem != "" {
		return nil, "", problem
	}
	if sd.VendorClaimParameters, problem = v1DriverConfig(a.Devices.Config, driver, resourcev1.AllocationConfigSourceClaim, requests); problem != "" {
		return nil, "", problem
	}
	data := ""
	if len(remote) > 0 {
		raw, err := json.Marshal(v1HandleData{Devices: remote})
		if err != nil {
			return nil, "", fmt.Sprintf("has devices of driver %s that cannot be encoded: %v", driver, err)
		}
		data = string(raw)
	}
	return sd, data, ""
}

// v1DriverConfig returns the opaque parameters of source for driver: the
// configuration entries of the allocation (status.allocation.devices.config)
// with that source and opaque.driver == driver that apply to a request
// (listed in the entry's requests, by its name or its main request's, or
// the entry lists none) of one of the driver's results, requests. As in
// Kubernetes, the last entry that applies to a request wins. A v1alpha2
// handle carries one configuration per source for all of the driver's
// devices, so the requests must agree on it (compared as JSON values);
// when they do not, problem says so and the claim is not prepared. The
// parameters are passed as they are: the example gpu driver reads a
// GpuClaimParameters object (apiVersion gpu.example.com/v1alpha1) from the
// claim's and a GpuClassParameters object from the class's.
func v1DriverConfig(configs []resourcev1.DeviceAllocationConfiguration, driver string, source resourcev1.AllocationConfigSource, requests []string) (*runtime.RawExtension, string) {
	var chosen *runtime.RawExtension
	for i, req := range requests {
		var applies *runtime.RawExtension
		for j := range configs {
			c := &configs[j]
			if c.Source == source && c.Opaque != nil && c.Opaque.Driver == driver && configApplies(c.Requests, req) {
				applies = &c.Opaque.Parameters
			}
		}
		if i == 0 {
			chosen = applies
			continue
		}
		if !sameParameters(chosen, applies) {
			return nil, fmt.Sprintf("has opaque configuration from its %s for driver %s that differs between requests %q and %q, "+
				"which the node agent cannot prepare: a v1alpha2 resource handle carries one configuration per driver",
				sourceWord(source), driver, requests[0], req)
		}
	}
	if chosen == nil || len(chosen.Raw) == 0 {
		return nil, ""
	}
	return &runtime.RawExtension{Raw: slices.Clone(chosen.Raw)}, ""
}

func sourceWord(s resourcev1.AllocationConfigSource) string {
	if s == resourcev1.AllocationConfigSourceClass {
		return "class"
	}
	return "claim"
}

// configApplies reports whether a configuration entry listing requests
// applies to a result of request ("main" or "main/subrequest").
func configApplies(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	main, _, _ := strings.Cut(request, "/")
	return slices.Contains(requests, request) || slices.Contains(requests, main)
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
