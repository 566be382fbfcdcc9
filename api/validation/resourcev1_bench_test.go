package validation

import (
	"encoding/json"
	"strings"
	"testing"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// benchClaimV1 is the claim of internal/apiserver's BenchmarkWrite
// claim/create and BenchmarkBindClaim (v1Claim there), as stored: one
// exact request with a CEL selector and an opaque configuration.
func benchClaimV1() *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: "default", UID: "u-1", ResourceVersion: "7",
			Labels: map[string]string{"app": "demo", "i": "1"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "gpu.example.com",
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
					Expression: `device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"`}}},
			}}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com",
					Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`)}}}}},
		}},
	}
}

// benchBoundClaimV1 is benchClaimV1 as a binding writes it: allocated on
// node n1 and reserved for one pod.
func benchBoundClaimV1() *resourcev1.ResourceClaim {
	c := benchClaimV1()
	c.Status = resourcev1.ResourceClaimStatus{
		Allocation: &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}},
			NodeSelector: &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchFields: []k8scorev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
		},
		ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "c-1", UID: "p-1"}},
	}
	return c
}

// The validation a v1 claim create runs (no CEL compiler installed: the
// compiler's cost is the allocator's).
func BenchmarkValidateResourceClaimV1(b *testing.B) {
	c := benchClaimV1()
	b.ReportAllocs()
	for b.Loop() {
		if errs := ValidateResourceClaimV1(c); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

// The validation of a binding's status write: an unallocated claim gets
// its allocation and its first consumer.
func BenchmarkValidateResourceClaimV1StatusUpdate(b *testing.B) {
	oldC, newC := benchClaimV1(), benchBoundClaimV1()
	newC.ResourceVersion = "8"
	b.ReportAllocs()
	for b.Loop() {
		if errs := ValidateResourceClaimV1StatusUpdate(newC, oldC); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

// jsonObjectDecodes, the shortcut of validateJSONObjectV1, may only say
// yes where the decode it skips succeeds with a map.
func TestJSONObjectDecodesAgreesWithDecode(t *testing.T) {
	long := strings.Repeat("9", 400)
	for _, in := range []string{
		`{}`, ` {"a":1}`, "\n\t{\"a\":[1,2.5,-3,true,false,null,\"x\"]}", `{"apiVersion":"v1","kind":"K","e":"1e5"}`,
		`{"big":1e400}`, `{"big":1E400}`, `{"big":1.5e10}`, `{"small":1e-400}`, `{"long":` + long + `}`, `{"long":0.` + long + `}`,
		`[]`, `[{}]`, `"s"`, `1`, `null`, `{`, `{"a":}`, `{} {}`, `{}x`, ` `, "{\"a\":\"\xff\"}",
	} {
		var v any
		err := json.Unmarshal([]byte(in), &v)
		_, isMap := v.(map[string]any)
		if jsonObjectDecodes([]byte(in)) && (err != nil || !isMap) {
			t.Errorf("%.40q: shortcut says an object, the decode gives %T, %v", in, v, err)
		}
	}
}

// The binding's status checks build paths only for errors; the errors
// are those they always were, in the same order.
func TestClaimStatusV1ErrorsOfLazyPaths(t *testing.T) {
	oldC, newC := benchClaimV1(), benchBoundClaimV1()
	newC.Status.ReservedFor = append(newC.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{APIGroup: "Bad_Group"})
	newC.Status.Allocation.Devices.Results[0].Device = "GPU_0"
	newC.Status.Allocation.Devices.Results = append(newC.Status.Allocation.Devices.Results,
		resourcev1.DeviceRequestAllocationResult{Request: "tpu", Driver: "gpu.example.com", Pool: "n1"})
	var got []string
	for _, e := range ValidateResourceClaimV1StatusUpdate(newC, oldC) {
		got = append(got, e.Error())
	}
	want := []string{
		`status.reservedFor[1].apiGroup: Invalid value: "Bad_Group": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`status.reservedFor[1].resource: Required value`,
		`status.reservedFor[1].name: Required value`,
		`status.reservedFor[1].uid: Required value`,
		`status.allocation.devices.results[0].device: Invalid value: "GPU_0": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		`status.allocation.devices.results[1].request: Invalid value: "tpu": must be the name of an ` + "`exactly`" + ` request of the claim, or <request>/<subrequest> for a ` + "`firstAvailable`" + ` request`,
		`status.allocation.devices.results[1].device: Required value`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
