package validation

import (
	"fmt"
	"strings"
	"testing"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func celSelector(expr string) resourcev1.DeviceSelector {
	return resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}
}

func opaque(driver, params string) resourcev1.DeviceConfiguration {
	return resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}
}

// v1Claim has an exact request "gpu" and a prioritized request "nic" with
// the subrequests "fast" and "slow".
func v1Claim(f func(*resourcev1.ResourceClaim)) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: objMeta("claim-1", "default"),
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "gpu.example.com",
					Selectors:       []resourcev1.DeviceSelector{celSelector(`device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"`)},
				}},
				{Name: "nic", FirstAvailable: []resourcev1.DeviceSubRequest{
					{Name: "fast", DeviceClassName: "nic.example.com", Selectors: []resourcev1.DeviceSelector{celSelector(`device.capacity["nic.example.com"].bandwidth.compareTo(quantity("100G")) >= 0`)}},
					{Name: "slow", DeviceClassName: "nic.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
				}},
			},
			Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"gpu", "nic/fast"}, MatchAttribute: ptr(resourcev1.FullyQualifiedName("dra.k8s.io/pcieRoot"))}},
			Config:      []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: opaque("gpu.example.com", `{"sharing":"TimeSlicing"}`)}},
		}},
	}
	if f != nil {
		f(c)
	}
	return c
}

func exactly(f func(*resourcev1.ExactDeviceRequest)) func(*resourcev1.ResourceClaim) {
	return func(c *resourcev1.ResourceClaim) { f(c.Spec.Devices.Requests[0].Exactly) }
}

func subrequest(f func(*resourcev1.DeviceSubRequest)) func(*resourcev1.ResourceClaim) {
	return func(c *resourcev1.ResourceClaim) { f(&c.Spec.Devices.Requests[1].FirstAvailable[0]) }
}

func tolerate(tols ...resourcev1.DeviceToleration) func(*resourcev1.ResourceClaim) {
	return exactly(func(e *resourcev1.ExactDeviceRequest) { e.Tolerations = tols })
}

const (
	req0  = "spec.devices.requests[0]"
	ex0   = req0 + ".exactly"
	sub10 = "spec.devices.requests[1].firstAvailable[0]"
)

func TestValidateResourceClaimV1(t *testing.T) {
	SetDeviceSelectorCompiler(fakeCompiler)
	t.Cleanup(func() { SetDeviceSelectorCompiler(nil) })
	many := func(n int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", s, i)
		}
		return out
	}
	for name, tc := range map[string]struct {
		claim *resourcev1.ResourceClaim
		want  []string
	}{
		"valid":               {claim: v1Claim(nil)},
		"name not subdomain":  {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Name = "Claim_1" }), want: []string{"metadata.name: Invalid value"}},
		"namespace not label": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Namespace = "a.b" }), want: []string{"metadata.namespace: Invalid value"}},
		// "If empty, nothing needs to be allocated."
		"no requests": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices = resourcev1.DeviceClaim{} })},

		// Requests: names "Must be a DNS label.", unique, at most 32; "One
		// of Exactly or FirstAvailable must be set."
		"request without name": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Name = ""
			c.Spec.Devices.Constraints, c.Spec.Devices.Config = nil, nil
		}), want: []string{req0 + ".name: Required value"}},
		"request name not label": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Name = "GPU"
			c.Spec.Devices.Constraints, c.Spec.Devices.Config = nil, nil
		}), want: []string{req0 + ".name: Invalid value"}},
		"duplicate request names": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].Name = "gpu" }),
			want: []string{"spec.devices.requests[1]: Duplicate value", "spec.devices.constraints[0].requests[1]: Invalid value"}},
		"32 requests": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			for _, n := range many(30, "more-") {
				c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: n, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}})
			}
		})},
		"33 requests": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			for _, n := range many(31, "more-") {
				c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: n, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}})
			}
		}), want: []string{"spec.devices.requests: Too many: 33: must have at most 32 items"}},
		"neither exactly nor firstAvailable": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly = nil }),
			want: []string{req0 + ": Required value: must specify one of: `exactly`, `firstAvailable`"}},
		"both exactly and firstAvailable": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].FirstAvailable = c.Spec.Devices.Requests[1].FirstAvailable
		}), want: []string{req0 + ": Invalid value: may specify only one of: `exactly`, `firstAvailable`"}},

		// Exact requests.
		"no device class":         {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.DeviceClassName = "" })), want: []string{ex0 + ".deviceClassName: Required value"}},
		"device class not a name": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.DeviceClassName = "GPU" })), want: []string{ex0 + ".deviceClassName: Invalid value"}},
		"selector without cel":    {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Selectors[0].CEL = nil })), want: []string{ex0 + ".selectors[0].cel: Required value"}},
		"empty expression":        {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Selectors[0].CEL.Expression = "" })), want: []string{ex0 + ".selectors[0].cel.expression: Required value"}},
		"expression does not compile": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Selectors[0].CEL.Expression = "device.driver !! 1" })),
			want: []string{ex0 + ".selectors[0].cel.expression: Invalid value: \"device.driver !! 1\": does not compile: syntax error at '!!'"}},
		"expression of 10 Ki": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.Selectors[0].CEL.Expression = "true" + strings.Repeat(" ", 10*1024-4)
		}))},
		"expression over 10 Ki": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.Selectors[0].CEL.Expression = "true" + strings.Repeat(" ", 10*1024-3)
		})), want: []string{ex0 + ".selectors[0].cel.expression: Too long: may not be more than 10240 bytes"}},
		"32 selectors": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			for range 31 {
				e.Selectors = append(e.Selectors, celSelector("true"))
			}
		}))},
		"33 selectors": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			for range 32 {
				e.Selectors = append(e.Selectors, celSelector("true !!"))
			}
		})), want: []string{ex0 + ".selectors: Too many: 33: must have at most 32 items"}},
		// "ExactCount: This request is for a specific number of devices.";
		// "Count [...] Must be greater than zero."; "All: This request is
		// for all of the matching devices in a pool."
		"count 3":            {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.AllocationMode, e.Count = "ExactCount", 3 }))},
		"count without mode": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Count = 2 }))},
		"negative count":     {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Count = -1 })), want: []string{ex0 + ".count: Invalid value: -1: must be greater than zero"}},
		"count 32":           {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Count = 32 }))},
		"count 33":           {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Count = 33 })), want: []string{ex0 + ".count: Invalid value: 33: must be at most 32"}},
		"count 2^63-1":       {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Count = 1<<63 - 1 })), want: []string{ex0 + ".count: Invalid value: 9223372036854775807: must be at most 32"}},
		"mode All":           {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.AllocationMode = "All" }))},
		"mode All with count": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.AllocationMode, e.Count = "All", 2 })),
			want: []string{ex0 + ".count: Invalid value: 2: must not be set when `allocationMode` is 'All'"}},
		"unknown mode": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.AllocationMode = "Some" })), want: []string{ex0 + ".allocationMode: Unsupported value"}},
		"adminAccess":  {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.AdminAccess = ptr(true) }))},

		// Tolerations: at most 16; "If the key is empty, operator must be
		// Exists"; "If the operator is Exists, the value must be empty";
		// operator defaults to Equal.
		"tolerations": {claim: v1Claim(tolerate(
			resourcev1.DeviceToleration{Key: "example.com/broken", Value: "yes", Effect: "NoSchedule"},
			resourcev1.DeviceToleration{Operator: "Exists"},
			resourcev1.DeviceToleration{Key: "maintenance", Operator: "Exists", Effect: "None"},
		))},
		"17 tolerations": {claim: v1Claim(tolerate(make([]resourcev1.DeviceToleration, 17)...)), want: []string{ex0 + ".tolerations: Too many: 17: must have at most 16 items"}},
		"empty key needs Exists": {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Effect: "NoSchedule"})),
			want: []string{ex0 + ".tolerations[0].operator: Invalid value: \"Equal\": must be 'Exists' when `key` is empty"}},
		"Exists with value": {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Operator: "Exists", Value: "b"})), want: []string{ex0 + ".tolerations[0].value: Invalid value"}},
		"value not label":   {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Value: "a b"})), want: []string{ex0 + ".tolerations[0].value: Invalid value"}},
		"key not label key": {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a b", Operator: "Exists"})), want: []string{ex0 + ".tolerations[0].key: Invalid value"}},
		"unknown operator":  {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Operator: "In"})), want: []string{ex0 + ".tolerations[0].operator: Unsupported value"}},
		"unknown effect":    {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Effect: "PreferNoSchedule"})), want: []string{ex0 + ".tolerations[0].effect: Unsupported value"}},
		// NoExecute with tolerationSeconds; as in Kubernetes 1.37 any
		// value is accepted (zero and negative evict at once) and seconds
		// on another effect are ignored, not refused.
		"NoExecute toleration":          {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Effect: "NoExecute", TolerationSeconds: ptr(int64(60))}))},
		"NoExecute negative seconds":    {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Effect: "NoExecute", TolerationSeconds: ptr(int64(-5))}))},
		"seconds on NoSchedule ignored": {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Effect: "NoSchedule", TolerationSeconds: ptr(int64(5))}))},
		"seconds with a bad effect": {claim: v1Claim(tolerate(resourcev1.DeviceToleration{Key: "a", Effect: "NoExecut", TolerationSeconds: ptr(int64(5))})),
			want: []string{ex0 + ".tolerations[0].effect: Unsupported value"}},

		// Gated request fields.
		"capacity": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("10Gi")}}
		}))},
		"capacity negative, bad name": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{
				"memory": resource.MustParse("-1"), "Bad Name": resource.MustParse("1")}}
		})), want: []string{ex0 + ".capacity.requests[Bad Name]", ex0 + ".capacity.requests[memory]: Invalid value"}},
		"derivedAttributes (gate off)": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "dra.k8s.io/pcieRoot", Expression: `"x"`}}
		})), want: []string{ex0 + ".derivedAttributes: " + gateOff("DRADerivedAttributes")}},

		// Subrequests: at most 8, unique DNS-label names, a class, the
		// same selectors, counts and tolerations as exact requests.
		"8 subrequests": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			for _, n := range many(6, "alt-") {
				c.Spec.Devices.Requests[1].FirstAvailable = append(c.Spec.Devices.Requests[1].FirstAvailable, resourcev1.DeviceSubRequest{Name: n, DeviceClassName: "nic.example.com"})
			}
		})},
		"9 subrequests": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			for _, n := range many(7, "alt-") {
				c.Spec.Devices.Requests[1].FirstAvailable = append(c.Spec.Devices.Requests[1].FirstAvailable, resourcev1.DeviceSubRequest{Name: n, DeviceClassName: "nic.example.com"})
			}
		}), want: []string{"spec.devices.requests[1].firstAvailable: Too many: 9: must have at most 8 items"}},
		"duplicate subrequests": {claim: v1Claim(subrequest(func(s *resourcev1.DeviceSubRequest) { s.Name = "slow" })),
			want: []string{"spec.devices.requests[1].firstAvailable[1]: Duplicate value", "spec.devices.constraints[0].requests[1]: Invalid value"}},
		"subrequest without name": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[1].Name = "" }),
			want: []string{"spec.devices.requests[1].firstAvailable[1].name: Required value"}},
		"subrequest without class": {claim: v1Claim(subrequest(func(s *resourcev1.DeviceSubRequest) { s.DeviceClassName = "" })), want: []string{sub10 + ".deviceClassName: Required value"}},
		"subrequest class invalid": {claim: v1Claim(subrequest(func(s *resourcev1.DeviceSubRequest) { s.DeviceClassName = "Nic" })), want: []string{sub10 + ".deviceClassName: Invalid value"}},
		"subrequest bad selector": {claim: v1Claim(subrequest(func(s *resourcev1.DeviceSubRequest) { s.Selectors[0].CEL.Expression = "!!" })),
			want: []string{sub10 + ".selectors[0].cel.expression: Invalid value"}},
		"subrequest All with count": {claim: v1Claim(subrequest(func(s *resourcev1.DeviceSubRequest) { s.AllocationMode, s.Count = "All", 1 })),
			want: []string{sub10 + ".count: Invalid value"}},
		"subrequest NoExecute": {claim: v1Claim(subrequest(func(s *resourcev1.DeviceSubRequest) {
			s.Tolerations = []resourcev1.DeviceToleration{{Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr(int64(30))}}
		}))},

		// Constraints: "DeviceConstraint must have exactly one field set
		// besides Requests"; requests name requests of the claim, as
		// <request>[/<subrequest>]; matchAttribute "Must include the
		// domain qualifier."
		"constraint for all requests":         {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = nil })},
		"constraint on a prioritized request": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"nic"} })},
		"constraint unknown request": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"tpu"} }),
			want: []string{"spec.devices.constraints[0].requests[0]: Invalid value"}},
		"constraint unknown subrequest": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"nic/medium"} }),
			want: []string{"spec.devices.constraints[0].requests[0]: Invalid value"}},
		"constraint subrequest of exact request": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"gpu/fast"} }),
			want: []string{"spec.devices.constraints[0].requests[0]: Invalid value"}},
		"constraint request twice": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"gpu", "gpu"} }),
			want: []string{"spec.devices.constraints[0].requests[1]: Duplicate value"}},
		"constraint without attribute": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].MatchAttribute = nil }),
			want: []string{"spec.devices.constraints[0]: Required value: must specify one of: `matchAttribute`, `distinctAttribute`"}},
		"constraint with both": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].DistinctAttribute = ptr(resourcev1.FullyQualifiedName("dra.k8s.io/pcieRoot"))
		}), want: []string{"spec.devices.constraints[0]: Invalid value"}},
		"distinctAttribute": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].MatchAttribute, c.Spec.Devices.Constraints[0].DistinctAttribute = nil, ptr(resourcev1.FullyQualifiedName("dra.k8s.io/pcieRoot"))
		})},
		"matchAttribute without domain": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].MatchAttribute = ptr(resourcev1.FullyQualifiedName("pcieRoot"))
		}), want: []string{"spec.devices.constraints[0].matchAttribute: Invalid value"}},
		"matchAttribute with two slashes": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].MatchAttribute = ptr(resourcev1.FullyQualifiedName("dra.k8s.io/a/b"))
		}), want: []string{"spec.devices.constraints[0].matchAttribute: Invalid value"}},
		"33 constraints": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			for range 32 {
				c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, c.Spec.Devices.Constraints[0])
			}
		}), want: []string{"spec.devices.constraints: Too many: 33: must have at most 32 items"}},

		// Config: requests as for constraints; "DeviceConfiguration must
		// have exactly one field set"; the driver a DNS subdomain of at
		// most 63; parameters a JSON object of at most 10 Ki.
		"config unknown request": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Requests = []string{"tpu"} }),
			want: []string{"spec.devices.config[0].requests[0]: Invalid value"}},
		"config without opaque": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque = nil }),
			want: []string{"spec.devices.config[0].opaque: Required value"}},
		"config without driver": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Driver = "" }),
			want: []string{"spec.devices.config[0].opaque.driver: Required value"}},
		"config driver too long": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Config[0].Opaque.Driver = strings.Repeat("a", 52) + ".example.com"
		}),
			want: []string{"spec.devices.config[0].opaque.driver: Too long"}},
		"config parameters not an object": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`[1]`) }),
			want: []string{"spec.devices.config[0].opaque.parameters: Invalid value: must be a JSON object"}},
		"config parameters missing": {claim: v1Claim(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Parameters.Raw = nil }),
			want: []string{"spec.devices.config[0].opaque.parameters: Required value"}},
		"config parameters over 10 Ki": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`{"a":"` + strings.Repeat("x", 10*1024) + `"}`)
		}), want: []string{"spec.devices.config[0].opaque.parameters: Too long"}},
		"33 configs": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			for range 32 {
				c.Spec.Devices.Config = append(c.Spec.Devices.Config, c.Spec.Devices.Config[0])
			}
		}), want: []string{"spec.devices.config: Too many: 33: must have at most 32 items"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimV1(tc.claim), tc.want...) })
	}
}

func TestValidateResourceClaimV1WithoutCompiler(t *testing.T) {
	SetDeviceSelectorCompiler(nil)
	c := v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Selectors[0].CEL.Expression = "!!" }))
	expectErrs(t, ValidateResourceClaimV1(c))
	c = v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Selectors[0].CEL.Expression = "" }))
	expectErrs(t, ValidateResourceClaimV1(c), ex0+".selectors[0].cel.expression: Required value")

	SetDeviceSelectorCompiler(fakeCompiler)
	t.Cleanup(func() { SetDeviceSelectorCompiler(nil) })
	c = v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Selectors[0].CEL.Expression = "panic" }))
	expectErrs(t, ValidateResourceClaimV1(c), ex0+".selectors[0].cel.expression: Internal error: selector compiler panicked")
}

// TestV1DerivedAttributeRules checks derived attributes with their gate on:
// "Every derived attribute defined in this list must be referenced by at
// least one MatchAttribute or DistinctAttribute constraint".
func TestV1DerivedAttributeRules(t *testing.T) {
	withV1Features(t, V1FeatureDerivedAttributes)
	derived := func(name string) resourcev1.DeviceDerivedAttribute {
		return resourcev1.DeviceDerivedAttribute{Name: resourcev1.FullyQualifiedName(name), Expression: `device.attributes["dra.k8s.io"].pcieRoot`}
	}
	for name, tc := range map[string]struct {
		claim *resourcev1.ResourceClaim
		want  []string
	}{
		"referenced": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{derived("dra.k8s.io/pcieRoot")}
		}))},
		"referenced through the parent request": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].Requests = []string{"gpu", "nic"}
			c.Spec.Devices.Requests[1].FirstAvailable[1].DerivedAttributes = []resourcev1.DeviceDerivedAttribute{derived("dra.k8s.io/pcieRoot")}
		})},
		"not referenced": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{derived("derived/numa")}
		})),
			want: []string{ex0 + ".derivedAttributes[0].name: Invalid value"}},
		"constraint on another subrequest": {claim: v1Claim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[1].FirstAvailable[1].DerivedAttributes = []resourcev1.DeviceDerivedAttribute{derived("dra.k8s.io/pcieRoot")}
		}), want: []string{"spec.devices.requests[1].firstAvailable[1].derivedAttributes[0].name: Invalid value"}},
		"duplicate": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{derived("dra.k8s.io/pcieRoot"), derived("dra.k8s.io/pcieRoot")}
		})), want: []string{ex0 + ".derivedAttributes[1].name: Duplicate value"}},
		"not fully qualified": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{derived("numa")}
		})),
			want: []string{ex0 + ".derivedAttributes[0].name: Invalid value", ex0 + ".derivedAttributes[0].name: Invalid value: \"numa\": must be referenced"}},
		"no expression": {claim: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) {
			e.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "dra.k8s.io/pcieRoot"}}
		})), want: []string{ex0 + ".derivedAttributes[0].expression: Required value"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimV1(tc.claim), tc.want...) })
	}
}

func TestValidateResourceClaimV1Update(t *testing.T) {
	for name, tc := range map[string]struct {
		old, new *resourcev1.ResourceClaim
		want     []string
	}{
		"labels may change": {old: v1Claim(nil), new: v1Claim(func(c *resourcev1.ResourceClaim) { c.Labels = map[string]string{"a": "b"} })},
		// "The spec is immutable."
		"spec changes": {old: v1Claim(nil), new: v1Claim(exactly(func(e *resourcev1.ExactDeviceRequest) { e.Count = 2 })), want: []string{"spec: Invalid value: field is immutable"}},
		// Defaults are no change: the old claim was stored defaulted.
		"defaults are no change": {old: v1Claim(func(c *resourcev1.ResourceClaim) { DefaultResourceClaimV1(c) }), new: v1Claim(nil)},
		"namespace changes": {old: v1Claim(nil), new: v1Claim(func(c *resourcev1.ResourceClaim) { c.Namespace = "other" }),
			want: []string{"metadata.namespace: Invalid value: \"other\": field is immutable"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimV1Update(tc.new, tc.old), tc.want...) })
	}
}

func v1Template(f func(*resourcev1.ResourceClaimTemplate)) *resourcev1.ResourceClaimTemplate {
	t := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: objMeta("gpu-template", "default"),
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "training"}, Annotations: map[string]string{"example.com/note": "x"}},
			Spec:       v1Claim(nil).Spec,
		},
	}
	if f != nil {
		f(t)
	}
	return t
}

func TestValidateResourceClaimTemplateV1(t *testing.T) {
	SetDeviceSelectorCompiler(fakeCompiler)
	t.Cleanup(func() { SetDeviceSelectorCompiler(nil) })
	for name, tc := range map[string]struct {
		tmpl *resourcev1.ResourceClaimTemplate
		want []string
	}{
		"valid":         {tmpl: v1Template(nil)},
		"name invalid":  {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Name = "GPU" }), want: []string{"metadata.name: Invalid value"}},
		"label invalid": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Labels = map[string]string{"a b": "c"} }), want: []string{"spec.metadata.labels: Invalid value"}},
		// "ObjectMeta may contain labels and annotations [...] No other
		// fields are allowed and will be rejected during validation."
		"metadata name":             {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Name = "claim" }), want: []string{"spec.metadata.name: Forbidden"}},
		"metadata empty finalizers": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Finalizers = []string{} })},
		"metadata finalizers": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Finalizers = []string{"example.com/f"} }),
			want: []string{"spec.metadata.finalizers: Forbidden"}},
		"claim spec checked": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) {
			t.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = ""
		}),
			want: []string{"spec.spec.devices.requests[0].exactly.deviceClassName: Required value"}},
		"generated checks on claim spec": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Spec.Devices.Requests[1].Name = "gpu" }),
			want: []string{"spec.spec.devices.requests[1]: Duplicate value", "spec.spec.devices.constraints[0].requests[1]: Invalid value"}},
		"selector compiled": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) {
			t.Spec.Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression = "!!"
		}),
			want: []string{"spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value"}},
		"gates apply": {tmpl: v1Template(func(t *resourcev1.ResourceClaimTemplate) {
			t.Spec.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "dra.k8s.io/pcieRoot", Expression: `"x"`}}
		}), want: []string{"spec.spec.devices.requests[0].exactly.derivedAttributes: " + gateOff("DRADerivedAttributes")}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimTemplateV1(tc.tmpl), tc.want...) })
	}
	// "This field is immutable."
	old := v1Template(func(t *resourcev1.ResourceClaimTemplate) { DefaultResourceClaimTemplateV1(t) })
	expectErrs(t, ValidateResourceClaimTemplateV1Update(v1Template(nil), old))
	expectErrs(t, ValidateResourceClaimTemplateV1Update(v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Labels = map[string]string{"a": "b"} }), old))
	expectErrs(t, ValidateResourceClaimTemplateV1Update(v1Template(func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Labels = nil }), old), "spec: Invalid value: field is immutable")
}

// allocatedClaim is v1Claim with an allocation for "gpu" and "nic/fast".
func allocatedClaim(f func(*resourcev1.ResourceClaim)) *resourcev1.ResourceClaim {
	return v1Claim(func(c *resourcev1.ResourceClaim) {
		DefaultResourceClaimV1(c)
		c.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"},
					{Request: "nic/fast", Driver: "nic.example.com", Pool: "node-1", Device: "eth1"},
				},
				Config: []resourcev1.DeviceAllocationConfiguration{
					{Source: resourcev1.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: opaque("gpu.example.com", `{}`)},
				},
			},
			NodeSelector: &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchFields: []k8scorev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"node-1"}},
			}}}},
		}
		if f != nil {
			f(c)
		}
	})
}

func reserved(uids ...string) func(*resourcev1.ResourceClaim) {
	return func(c *resourcev1.ResourceClaim) {
		for _, uid := range uids {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "pod-" + uid, UID: types.UID(uid)})
		}
	}
}

func result0(f func(*resourcev1.DeviceRequestAllocationResult)) func(*resourcev1.ResourceClaim) {
	return func(c *resourcev1.ResourceClaim) { f(&c.Status.Allocation.Devices.Results[0]) }
}

func condition(typ string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.Now()}
}

func deviceStatus(f func(*resourcev1.AllocatedDeviceStatus)) func(*resourcev1.ResourceClaim) {
	return func(c *resourcev1.ResourceClaim) {
		s := resourcev1.AllocatedDeviceStatus{
			Driver: "nic.example.com", Pool: "node-1", Device: "eth1",
			Conditions:  []metav1.Condition{condition("Ready")},
			Data:        &runtime.RawExtension{Raw: []byte(`{"mtu":9000}`)},
			NetworkData: &resourcev1.NetworkDeviceData{InterfaceName: "net1", IPs: []string{"10.0.0.5/24", "2001:db8::5/64"}, HardwareAddress: "02:42:ac:11:00:02"},
		}
		if f != nil {
			f(&s)
		}
		c.Status.Devices = append(c.Status.Devices, s)
	}
}

func TestValidateResourceClaimV1StatusUpdate(t *testing.T) {
	const (
		res0 = "status.allocation.devices.results[0]"
		dev0 = "status.devices[0]"
	)
	unallocated := v1Claim(nil)
	deleted := metav1.Now()
	for name, tc := range map[string]struct {
		old, new *resourcev1.ResourceClaim
		want     []string
	}{
		"allocate and reserve": {old: unallocated, new: allocatedClaim(reserved("uid-1"))},
		"allocate":             {old: unallocated, new: allocatedClaim(nil)},
		"reserve":              {old: allocatedClaim(nil), new: allocatedClaim(reserved("uid-1", "uid-2"))},
		"unreserve":            {old: allocatedClaim(reserved("uid-1")), new: allocatedClaim(nil)},
		"deallocate":           {old: allocatedClaim(nil), new: v1Claim(nil)},
		"reserve unallocated":  {old: unallocated, new: v1Claim(reserved("uid-1")), want: []string{"status.reservedFor: Forbidden: may only be set while `allocation` is set"}},
		"deallocate while reserved": {old: allocatedClaim(reserved("uid-1")), new: v1Claim(reserved("uid-1")),
			want: []string{"status.allocation: Forbidden: may not be cleared while `reservedFor` is not empty"}},
		"change allocation": {old: allocatedClaim(nil), new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.Device = "gpu-1" })),
			want: []string{"status.allocation: Invalid value: null: field cannot be modified once set"}},
		"reserved twice": {old: allocatedClaim(nil), new: allocatedClaim(reserved("uid-1", "uid-1")), want: []string{"status.reservedFor[1]: Duplicate value"}},
		"256 reservations": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			for i := range 256 {
				reserved(fmt.Sprintf("uid-%d", i))(c)
			}
		})},
		"257 reservations": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			for i := range 257 {
				reserved(fmt.Sprintf("uid-%d", i))(c)
			}
		}), want: []string{"status.reservedFor: Too many: 257: must have at most 256 items"}},
		"incomplete reservation": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{UID: "u", APIGroup: "Bad Group"}}
		}), want: []string{"status.reservedFor[0].resource: Required value", "status.reservedFor[0].name: Required value", "status.reservedFor[0].apiGroup: Invalid value"}},
		"reservation without uid": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p"}}
		}), want: []string{"status.reservedFor[0].uid: Required value"}},
		"deleting: consumers may go": {
			old: allocatedClaim(func(c *resourcev1.ResourceClaim) { reserved("uid-1", "uid-2")(c); c.DeletionTimestamp = &deleted }),
			new: allocatedClaim(func(c *resourcev1.ResourceClaim) { reserved("uid-2")(c); c.DeletionTimestamp = &deleted }),
		},
		"deleting: no new consumer": {
			old:  allocatedClaim(func(c *resourcev1.ResourceClaim) { reserved("uid-1")(c); c.DeletionTimestamp = &deleted }),
			new:  allocatedClaim(func(c *resourcev1.ResourceClaim) { reserved("uid-1", "uid-2")(c); c.DeletionTimestamp = &deleted }),
			want: []string{"status.reservedFor[1]: Forbidden: new consumers may not be added while the claim is being deleted"},
		},

		// A new allocation: results for requests of the claim ("If it
		// references a subrequest in the firstAvailable list on a
		// DeviceRequest, this field must include both the name of the main
		// request and the subrequest"), valid devices, at most 32.
		"result for unknown request": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.Request = "tpu" })),
			want: []string{res0 + ".request: Invalid value"}},
		"result for prioritized request without subrequest": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.Request = "nic" })),
			want: []string{res0 + ".request: Invalid value"}},
		"result device invalid": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.Device = "GPU_0" })),
			want: []string{res0 + ".device: Invalid value"}},
		"result without driver": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.Driver = "" })),
			want: []string{res0 + ".driver: Required value"}},
		"result pool invalid": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.Pool = "a//b" })),
			want: []string{res0 + ".pool: Invalid value"}},
		"33 results": {old: unallocated, new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			for i := range 31 {
				c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
					resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: fmt.Sprintf("gpu-%d", i+1)})
			}
		}), want: []string{"status.allocation.devices.results: Too many: 33: must have at most 32 items"}},
		"result tolerations": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) {
			r.Tolerations = []resourcev1.DeviceToleration{{Key: "a", Effect: "NoSchedule"}}
		}))},
		"result NoExecute toleration": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) {
			r.Tolerations = []resourcev1.DeviceToleration{{Key: "a", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr(int64(30))}}
		}))},
		"result adminAccess": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) { r.AdminAccess = ptr(true) }))},
		"result shareID and consumedCapacity": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) {
			r.ShareID = ptr(types.UID("0b2ab5e8-1a63-4f2b-9f9a-3c1c1d8a4e10"))
			r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}
		}))},
		"result shareID not a UUID, consumedCapacity negative": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) {
			r.ShareID = ptr(types.UID("share-1"))
			r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("-1")}
		})), want: []string{res0 + ".shareID: Invalid value", res0 + ".consumedCapacity[bandwidth]: Invalid value"}},
		"result bindingConditions": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) {
			r.BindingConditions, r.BindingFailureConditions = []string{"Attached"}, []string{"Failed"}
		}))},
		"result skipNodeOperations (gate off)": {old: unallocated, new: allocatedClaim(result0(func(r *resourcev1.DeviceRequestAllocationResult) {
			r.SkipNodeOperations = []resourcev1.SkipNodeOperation{"*"}
		})), want: []string{res0 + ".skipNodeOperations: " + gateOff("DRAOptionalNodeOperations")}},
		"config without source": {old: unallocated, new: allocatedClaim(func(c *resourcev1.ResourceClaim) { c.Status.Allocation.Devices.Config[0].Source = "" }),
			want: []string{"status.allocation.devices.config[0].source: Required value"}},
		"config for unknown request": {old: unallocated, new: allocatedClaim(func(c *resourcev1.ResourceClaim) { c.Status.Allocation.Devices.Config[0].Requests = []string{"tpu"} }),
			want: []string{"status.allocation.devices.config[0].requests[0]: Invalid value"}},
		"config without opaque": {old: unallocated, new: allocatedClaim(func(c *resourcev1.ResourceClaim) { c.Status.Allocation.Devices.Config[0].Opaque = nil }),
			want: []string{"status.allocation.devices.config[0].opaque: Required value"}},
		"node selector without terms": {old: unallocated, new: allocatedClaim(func(c *resourcev1.ResourceClaim) { c.Status.Allocation.NodeSelector = &k8scorev1.NodeSelector{} }),
			want: []string{"status.allocation.nodeSelector.nodeSelectorTerms: Required value"}},
		"node selector of several terms": {old: unallocated, new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation.NodeSelector = oneTermSelector(2)
		})},

		// status.devices: "The combination of Driver, Pool, Device, and
		// ShareID must match the corresponding key in
		// Status.Allocation.Devices."; "Must not contain more than 8
		// entries." conditions; data at most 10 Ki; network data limits.
		"device status": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(nil))},
		"device status minimal": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}}
		})},
		"device status of another device": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.Device = "eth2" })),
			want: []string{dev0 + ": Invalid value: \"nic.example.com/node-1/eth2\": must be a device of `status.allocation.devices.results`"}},
		"device status without allocation": {old: unallocated, new: v1Claim(deviceStatus(nil)), want: []string{dev0 + ": Invalid value"}},
		"device status of a share": {old: allocatedClaim(shareOfEth1), new: allocatedClaim(func(c *resourcev1.ResourceClaim) {
			shareOfEth1(c)
			deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) {
				s.ShareID = ptr(string(*c.Status.Allocation.Devices.Results[1].ShareID))
			})(c)
		})},
		"device status with shareID": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.ShareID = ptr("0b2ab5e8-1a63-4f2b-9f9a-3c1c1d8a4e10") })),
			want: []string{dev0 + ": Invalid value"}},
		"device status twice": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) { deviceStatus(nil)(c); deviceStatus(nil)(c) }),
			want: []string{"status.devices[1]: Duplicate value"}},
		"device status driver invalid": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.Driver = "nic_example" })),
			want: []string{dev0 + ".driver: Invalid value", dev0 + ": Invalid value"}},
		"8 conditions": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) {
			s.Conditions = nil
			for i := range 8 {
				s.Conditions = append(s.Conditions, condition(fmt.Sprintf("C%d", i)))
			}
		}))},
		"9 conditions": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) {
			s.Conditions = nil
			for i := range 9 {
				s.Conditions = append(s.Conditions, condition(fmt.Sprintf("C%d", i)))
			}
		})), want: []string{dev0 + ".conditions: Too many: 9: must have at most 8 items"}},
		"condition without reason": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.Conditions[0].Reason = "" })),
			want: []string{dev0 + ".conditions[0].reason: Required value"}},
		"condition type twice": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.Conditions = append(s.Conditions, s.Conditions[0]) })),
			want: []string{dev0 + ".conditions[1]: Duplicate value"}},
		"data not an object": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.Data.Raw = []byte(`"x"`) })),
			want: []string{dev0 + ".data: Invalid value"}},
		"data over 10 Ki": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) {
			s.Data.Raw = []byte(`{"a":"` + strings.Repeat("x", 10*1024) + `"}`)
		})), want: []string{dev0 + ".data: Too long"}},
		"IP not CIDR": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.NetworkData.IPs = []string{"10.0.0.5"} })),
			want: []string{dev0 + ".networkData.ips[0]: Invalid value"}},
		"17 IPs": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) {
			s.NetworkData.IPs = nil
			for i := range 17 {
				s.NetworkData.IPs = append(s.NetworkData.IPs, fmt.Sprintf("10.0.0.%d/24", i+1))
			}
		})), want: []string{dev0 + ".networkData.ips: Too many: 17: must have at most 16 items"}},
		"IP twice": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.NetworkData.IPs = []string{"10.0.0.5/24", "10.0.0.5/24"} })),
			want: []string{dev0 + ".networkData.ips[1]: Duplicate value"}},
		"interface name of 257": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.NetworkData.InterfaceName = strings.Repeat("n", 257) })),
			want: []string{dev0 + ".networkData.interfaceName: Too long"}},
		"hardware address of 129": {old: allocatedClaim(nil), new: allocatedClaim(deviceStatus(func(s *resourcev1.AllocatedDeviceStatus) { s.NetworkData.HardwareAddress = strings.Repeat("a", 129) })),
			want: []string{dev0 + ".networkData.hardwareAddress: Too long"}},

		"name changes": {old: allocatedClaim(nil), new: allocatedClaim(func(c *resourcev1.ResourceClaim) { c.Name = "other" }),
			want: []string{"metadata.name: Invalid value: \"other\": field is immutable"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimV1StatusUpdate(tc.new, tc.old), tc.want...) })
	}
}

func TestDefaultResourceClaimV1(t *testing.T) {
	c := v1Claim(func(c *resourcev1.ResourceClaim) {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests,
			resourcev1.DeviceRequest{Name: "all", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: "All"}},
			resourcev1.DeviceRequest{Name: "three", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: 3,
				Tolerations: []resourcev1.DeviceToleration{{Key: "a"}, {Key: "b", Operator: "Exists"}}}})
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "three", Tolerations: []resourcev1.DeviceToleration{{Key: "a"}}},
		}}}
	})
	before := c.DeepCopy()
	if errs := ValidateResourceClaimV1(c); len(errs) > 0 {
		t.Fatalf("an undefaulted claim is valid, got %v", errs)
	}
	if !equalObjects(before, c) {
		t.Fatalf("validation changed its input")
	}
	DefaultResourceClaimV1(c)
	reqs := c.Spec.Devices.Requests
	for _, check := range []struct {
		name      string
		mode      resourcev1.DeviceAllocationMode
		count     int64
		wantMode  resourcev1.DeviceAllocationMode
		wantCount int64
	}{
		{"exactly without mode", reqs[0].Exactly.AllocationMode, reqs[0].Exactly.Count, "ExactCount", 1},
		{"subrequest without mode", reqs[1].FirstAvailable[0].AllocationMode, reqs[1].FirstAvailable[0].Count, "ExactCount", 1},
		{"subrequest with count", reqs[1].FirstAvailable[1].AllocationMode, reqs[1].FirstAvailable[1].Count, "ExactCount", 2},
		{"All keeps no count", reqs[2].Exactly.AllocationMode, reqs[2].Exactly.Count, "All", 0},
		{"count without mode", reqs[3].Exactly.AllocationMode, reqs[3].Exactly.Count, "ExactCount", 3},
	} {
		if check.mode != check.wantMode || check.count != check.wantCount {
			t.Errorf("%s: got %s/%d, want %s/%d", check.name, check.mode, check.count, check.wantMode, check.wantCount)
		}
	}
	if op := reqs[3].Exactly.Tolerations[0].Operator; op != "Equal" {
		t.Errorf("toleration operator defaults to Equal, got %q", op)
	}
	if op := reqs[3].Exactly.Tolerations[1].Operator; op != "Exists" {
		t.Errorf("toleration operator Exists is kept, got %q", op)
	}
	if op := c.Status.Allocation.Devices.Results[0].Tolerations[0].Operator; op != "Equal" {
		t.Errorf("result toleration operator defaults to Equal, got %q", op)
	}
	again := c.DeepCopy()
	DefaultResourceClaimV1(again)
	if !equalObjects(c, again) {
		t.Errorf("Default is not idempotent")
	}
	if errs := ValidateResourceClaimV1(c); len(errs) > 0 {
		t.Errorf("a defaulted claim is valid, got %v", errs)
	}

	tmpl := v1Template(nil)
	DefaultResourceClaimTemplateV1(tmpl)
	if e := tmpl.Spec.Spec.Devices.Requests[0].Exactly; e.AllocationMode != "ExactCount" || e.Count != 1 {
		t.Errorf("template defaults: got %s/%d", e.AllocationMode, e.Count)
	}
}

// shareOfEth1 makes the allocated eth1 a share of a shareable device.
func shareOfEth1(c *resourcev1.ResourceClaim) {
	share := types.UID("0b2ab5e8-1a63-4f2b-9f9a-3c1c1d8a4e10")
	c.Status.Allocation.Devices.Results[1].ShareID = &share
	c.Status.Allocation.Devices.Results[1].ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}
}

// Validation copies a claim to default it only when Default would change
// it (claimDefaultedV1); either way it leaves its input as it was.
func TestClaimDefaultedV1(t *testing.T) {
	tol := func(op resourcev1.DeviceTolerationOperator) []resourcev1.DeviceToleration {
		return []resourcev1.DeviceToleration{{Key: "a", Operator: op}}
	}
	cases := map[string]*resourcev1.ResourceClaim{
		"as written": v1Claim(nil),
		"defaulted":  allocatedClaim(nil),
		"exactly without count": allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Count = 0
		}),
		"All without count": allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.AllocationMode, c.Spec.Devices.Requests[0].Exactly.Count = "All", 0
		}),
		"request toleration without operator": allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Tolerations = tol("")
		}),
		"request toleration with operator": allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.Tolerations = tol("Exists")
		}),
		"result toleration without operator": allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation.Devices.Results[0].Tolerations = tol("")
		}),
		"result toleration with operator": allocatedClaim(func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation.Devices.Results[0].Tolerations = tol("Equal")
		}),
	}
	for name, c := range cases {
		d := c.DeepCopy()
		DefaultResourceClaimV1(d)
		if got, want := claimDefaultedV1(c), equalObjects(c, d); got != want {
			t.Errorf("%s: claimDefaultedV1 %v, but Default changes it: %v", name, got, !want)
		}
		before := c.DeepCopy()
		ValidateResourceClaimV1(c)
		ValidateResourceClaimV1Update(c, c)
		ValidateResourceClaimV1StatusUpdate(c, c)
		if !equalObjects(before, c) {
			t.Errorf("%s: validation changed its input", name)
		}
	}
}
