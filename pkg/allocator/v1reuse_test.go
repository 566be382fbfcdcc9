package allocator

import (
	"reflect"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// v1reuseFixture: node-a with a shareable NIC and two GPUs; classes with
// resourceVersions; claims of one shape (a "template") under any name.
type v1reuseFixture struct {
	st      *State
	classes []*resourcev1.DeviceClass
}

func newV1ReuseFixture() *v1reuseFixture {
	d := v1tDev("nic-0")
	d.AllowMultipleAllocations = ptr(true)
	d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: resource.MustParse("100G")}}
	st := NewState(NewInventory([]*resourcev1.ResourceSlice{
		v1tSlice("nics", v1tNIC, "node-a", "node-a", d),
		v1tSlice("gpus", v1tGPU, "node-a-gpus", "node-a", v1tGPUs(2, "a100")...),
	}, nil), nil, nil)
	classes := v1tClasses()
	for _, c := range classes {
		c.ResourceVersion = "1"
		c.Spec.Config = []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: v1reuseConfig(c.Name)}}
	}
	return &v1reuseFixture{st: st, classes: classes}
}

func v1reuseConfig(s string) resourcev1.DeviceConfiguration {
	return resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
		Driver: v1tGPU, Parameters: runtime.RawExtension{Raw: []byte(`{"for":"` + s + `"}`)}}}
}

// claim is the template's claim under name: a share of the NIC, GPUs
// (one of two subrequests), and a config of its own that names it.
func (f *v1reuseFixture) claim(name string, gpus int64) *resourcev1.ResourceClaim {
	share := v1tExact("nic", "nic", 1)
	share.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}}
	c := v1tClaim(name, share, v1tFirst("gpu", v1tSub("big", "gpu", gpus+1), v1tSub("small", "gpu", gpus)))
	c.Spec.Devices.Config = []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: v1reuseConfig(name)}}
	return c
}

func (f *v1reuseFixture) request(pod string, claims ...*resourcev1.ResourceClaim) *V1Request {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default", UID: k8stypes.UID(pod)}}
	return PrepareV1(p, v1tClaims(claims...), v1tClassFunc(f.classes))
}

func (f *v1reuseFixture) allocate(t *testing.T, req *V1Request) *V1Result {
	t.Helper()
	res, err := AllocateV1(t.Context(), req, f.st, v1tNode("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestV1ResultForIsTheAnswerToTheOtherRequest: two pods whose claims have
// one shape under other names have one Signature, and the answer to the
// first taken For the second is what AllocateV1 gives the second:
// allocations (with the second claim's config and share IDs) and
// reasons naming the second claim.
func TestV1ResultForIsTheAnswerToTheOtherRequest(t *testing.T) {
	f := newV1ReuseFixture()
	for _, tc := range []struct {
		name string
		gpus int64
		fits bool
	}{
		{"fits, second subrequest", 2, true},
		{"does not fit", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, two := f.request("p1", f.claim("c1", tc.gpus)), f.request("p2", f.claim("c2", tc.gpus))
			if one.Signature() == "" || one.Signature() != two.Signature() {
				t.Fatalf("signatures %q and %q, want one, not empty", one.Signature(), two.Signature())
			}
			a, want := f.allocate(t, one), f.allocate(t, two)
			if a.Fits != tc.fits {
				t.Fatalf("fits %v, want %v: %v", a.Fits, tc.fits, a.Reasons)
			}
			got := a.For(two)
			if !reflect.DeepEqual(got.Allocations, want.Allocations) {
				t.Errorf("allocations taken For the second request:\n%+v\nwant\n%+v", got.Allocations, want.Allocations)
			}
			if !reflect.DeepEqual(got.Reasons, want.Reasons) || !reflect.DeepEqual(a.ReasonsFor(two), want.Reasons) {
				t.Errorf("reasons taken For the second request %v (ReasonsFor %v), want %v", got.Reasons, a.ReasonsFor(two), want.Reasons)
			}
			if got.Fits != want.Fits || got.Score != want.Score {
				t.Errorf("fits, score %v %d, want %v %d", got.Fits, got.Score, want.Fits, want.Score)
			}
			if tc.fits && reflect.DeepEqual(a.Allocations, want.Allocations) {
				t.Fatal("the two claims' allocations are the same: the test cannot tell a renamed answer from the original")
			}
			if a.For(one) != a {
				t.Error("an answer taken For its own request is not itself")
			}
		})
	}
}

// TestV1SignatureSeesWhatTheAnswerDependsOn: each change of what
// AllocateV1 reads of a request changes the Signature; what it does not
// read (names, config) does not; requests whose answers are their own
// have none.
func TestV1SignatureSeesWhatTheAnswerDependsOn(t *testing.T) {
	f := newV1ReuseFixture()
	base := f.request("p", f.claim("c", 1)).Signature()
	same := map[string]*V1Request{
		"another claim name, pod and config": f.request("q", f.claim("other", 1)),
	}
	for name, r := range same {
		if r.Signature() != base {
			t.Errorf("%s: signature changed", name)
		}
	}
	edit := func(mod func(c *resourcev1.ResourceClaim)) *V1Request {
		c := f.claim("c", 1)
		mod(c)
		return f.request("p", c)
	}
	exact := func(c *resourcev1.ResourceClaim) *resourcev1.ExactDeviceRequest {
		return c.Spec.Devices.Requests[0].Exactly
	}
	differ := map[string]*V1Request{
		"count": f.request("p", f.claim("c", 2)),
		"selector": edit(func(c *resourcev1.ResourceClaim) {
			exact(c).Selectors = v1tSels([]string{`device.driver != ""`})
		}),
		"capacity request": edit(func(c *resourcev1.ResourceClaim) {
			exact(c).Capacity.Requests["bandwidth"] = resource.MustParse("20G")
		}),
		"tolerations": edit(func(c *resourcev1.ResourceClaim) {
			exact(c).Tolerations = []resourcev1.DeviceToleration{{Key: "k", Operator: resourcev1.DeviceTolerationOpExists}}
		}),
		"allocation mode": edit(func(c *resourcev1.ResourceClaim) {
			exact(c).AllocationMode, exact(c).Count = resourcev1.DeviceAllocationModeAll, 0
		}),
		"constraint": edit(func(c *resourcev1.ResourceClaim) {
			v1tConstrain(c, v1tMatch("gpu.example.com/model"))
		}),
		"request name": edit(func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[0].Name = "nic2" }),
		"two claims":   f.request("p", f.claim("c", 1), f.claim("d", 1)),
	}
	bumped := f.classes[1].DeepCopy()
	bumped.ResourceVersion = "2"
	bumpedReq := PrepareV1(nil, v1tClaims(f.claim("c", 1)), func(n string) *resourcev1.DeviceClass {
		if n == bumped.Name {
			return bumped
		}
		return v1tClassFunc(f.classes)(n)
	})
	differ["class resourceVersion"] = bumpedReq
	differ["admin namespace"] = PrepareV1(nil, []V1Claim{{Claim: f.claim("c", 1), AdminNamespace: true}}, v1tClassFunc(f.classes))
	for name, r := range differ {
		if s := r.Signature(); s == base || s == "" {
			t.Errorf("%s: signature %q, want another than the base's, not empty", name, s)
		}
	}
	allocated := f.claim("c", 1)
	allocated.Status.Allocation = &resourcev1.AllocationResult{}
	noRV := v1tClasses()
	none := map[string]*V1Request{
		"an allocated claim":                f.request("p", allocated),
		"a class without a resourceVersion": PrepareV1(nil, v1tClaims(f.claim("c", 1)), v1tClassFunc(noRV)),
		"a missing class":                   PrepareV1(nil, v1tClaims(f.claim("c", 1)), v1tClassFunc(nil)),
		"no claims":                         f.request("p"),
	}
	for name, r := range none {
		if s := r.Signature(); s != "" {
			t.Errorf("%s: signature %q, want none", name, s)
		}
	}
}
