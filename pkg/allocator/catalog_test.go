package allocator_test

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

func catalogClaimParams(ns, name string, from *resourceapi.ResourceClaimParametersReference) *resourceapi.ResourceClaimParameters {
	return &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, GeneratedFrom: from}
}

// The catalog's lookups are scenarios (testdata/scenarios/seed-catalog.txt).

// Inputs are the lists the catalog was built from, for callers that reuse
// it while they are unchanged.
func TestCatalogInputs(t *testing.T) {
	s := &allocator.Snapshot{
		Classes:         []*resourceapi.ResourceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}},
		ClaimParameters: []*resourceapi.ResourceClaimParameters{catalogClaimParams("default", "small", nil)},
		Claims:          []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "c"}}},
	}
	in := allocator.NewCatalog(s).Inputs()
	if &in.Classes[0] != &s.Classes[0] || &in.ClaimParameters[0] != &s.ClaimParameters[0] || in.Claims != nil || in.Nodes != nil {
		t.Errorf("Inputs = %+v, want the snapshot's classes and parameters only", in)
	}
}

// The catalog indexes resource.k8s.io/v1 DeviceClasses and claim
// templates too, and gives them back among its Inputs; v1 claims, slices
// and taint rules are not its business.
func TestCatalogV1Classes(t *testing.T) {
	s := &allocator.Snapshot{
		DeviceClasses:    []*resourcev1.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}},
		V1ClaimTemplates: []*resourcev1.ResourceClaimTemplate{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "one-gpu"}}},
		V1Claims:         []*resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "c"}}},
	}
	c := allocator.NewCatalog(s)
	if c.DeviceClass("gpu") != s.DeviceClasses[0] || c.DeviceClass("other") != nil {
		t.Error("DeviceClass does not find the class by name, or finds one that is not there")
	}
	if c.V1ClaimTemplate("default", "one-gpu") != s.V1ClaimTemplates[0] || c.V1ClaimTemplate("other", "one-gpu") != nil {
		t.Error("V1ClaimTemplate does not find the template by namespace and name, or finds one elsewhere")
	}
	in := c.Inputs()
	if &in.DeviceClasses[0] != &s.DeviceClasses[0] || &in.V1ClaimTemplates[0] != &s.V1ClaimTemplates[0] || in.V1Claims != nil {
		t.Errorf("Inputs = %+v, want the snapshot's DeviceClasses and v1 templates, no claims", in)
	}
}

// A container's extended resource R is served through DRA by the class
// whose extendedResourceName is R (the newest such class, ties by name),
// and deviceclass.resource.kubernetes.io/CLASS by class CLASS.
func TestCatalogExtendedResourceClass(t *testing.T) {
	t0 := metav1.Now()
	t1 := metav1.NewTime(t0.Add(1e9))
	class := func(name, ern string, at metav1.Time) *resourcev1.DeviceClass {
		c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at}}
		if ern != "" {
			c.Spec.ExtendedResourceName = &ern
		}
		return c
	}
	c := allocator.NewCatalog(&allocator.Snapshot{DeviceClasses: []*resourcev1.DeviceClass{
		class("old", "example.com/gpu", t0), class("new-b", "example.com/gpu", t1), class("new-a", "example.com/gpu", t1),
		class("plain", "", t0),
	}})
	for name, want := range map[string]string{
		"example.com/gpu":                          "new-a",
		"example.com/fpga":                         "",
		"deviceclass.resource.kubernetes.io/plain": "plain",
		"deviceclass.resource.kubernetes.io/old":   "old",
		"deviceclass.resource.kubernetes.io/none":  "",
	} {
		got := ""
		if dc := c.ExtendedResourceClass(name); dc != nil {
			got = dc.Name
		}
		if got != want {
			t.Errorf("ExtendedResourceClass(%s) = %q, want %q", name, got, want)
		}
	}
}
