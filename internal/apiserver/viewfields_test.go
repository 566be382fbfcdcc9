package apiserver

import (
	"maps"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"allot.dev/allot/api/resource/resourceconv"
)

// The watch cache's v1alpha2 fields of a v1 claim (claimV1ViewFields) are
// claimFields of its view, without building the view.
func TestClaimV1ViewFieldsMatchTheView(t *testing.T) {
	result := func(driver, device string) resourcev1.DeviceRequestAllocationResult {
		return resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: "n1", Device: device}
	}
	allocated := func(rs ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
		c := v1Claim("c")
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: rs}}
		return c
	}
	for name, c := range map[string]*resourcev1.ResourceClaim{
		"pending":               v1Claim("c"),
		"allocated, no results": allocated(),
		"one device":            allocated(result("gpu.example.com", "gpu-0")),
		"two of one driver":     allocated(result("gpu.example.com", "gpu-0"), result("gpu.example.com", "gpu-1")),
		"two drivers":           allocated(result("gpu.example.com", "gpu-0"), result("nic.example.com", "nic-0")),
		"a driver, then two":    allocated(result("a.example.com", "x"), result("a.example.com", "y"), result("b.example.com", "z")),
		"two drivers, back":     allocated(result("a.example.com", "x"), result("b.example.com", "y"), result("a.example.com", "z")),
	} {
		want := claimFields(resourceconv.ClaimToV1alpha2(c))
		if got := claimV1ViewFields(c); !maps.Equal(got, want) {
			t.Errorf("%s: %v, want the view's %v", name, got, want)
		}
	}
}
