package allocator_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

func catalogClaimParams(ns, name string, from *resourceapi.ResourceClaimParametersReference) *resourceapi.ResourceClaimParameters {
	return &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, GeneratedFrom: from}
}

func catalogClassParams(name string, from *resourceapi.ResourceClassParametersReference) *resourceapi.ResourceClassParameters {
	return &resourceapi.ResourceClassParameters{ObjectMeta: metav1.ObjectMeta{Namespace: "drivers", Name: name}, GeneratedFrom: from}
}

func vendorObject(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gpu.example.com/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = map[string]any{"memory": "8Gi"}
	return u
}

// Parameter objects that say they were generated from one vendor object:
// the first by name wins, whatever the order of the lists.
func TestCatalogFirstNameWins(t *testing.T) {
	claimRef := &resourceapi.ResourceClaimParametersReference{APIGroup: "gpu.example.com", Kind: "GpuClaimParameters", Name: "p"}
	classRef := &resourceapi.ResourceClassParametersReference{APIGroup: "gpu.example.com", Kind: "GpuClassParameters", Name: "p", Namespace: "drivers"}
	claimA, claimB := catalogClaimParams("default", "a", claimRef), catalogClaimParams("default", "b", claimRef)
	classA, classB := catalogClassParams("a", classRef), catalogClassParams("b", classRef)
	for _, order := range []string{"sorted", "reversed"} {
		t.Run(order, func(t *testing.T) {
			claims := []*resourceapi.ResourceClaimParameters{claimA, claimB}
			classes := []*resourceapi.ResourceClassParameters{classA, classB}
			if order == "reversed" {
				slices.Reverse(claims)
				slices.Reverse(classes)
			}
			cat := allocator.NewCatalog(&allocator.Snapshot{ClaimParameters: claims, ClassParameters: classes})
			if got, _ := cat.ClaimParameters("default", claimRef); got != claimA {
				t.Errorf("claim parameters generated from %s: got %v, want a", claimRef.Name, got.GetName())
			}
			if got, _ := cat.ClassParameters(classRef); got != classA {
				t.Errorf("class parameters generated from %s: got %v, want a", classRef.Name, got.GetName())
			}
		})
	}
}

// Kind ResourceClaimParameters / ResourceClassParameters with group "" or
// resource.k8s.io is the built-in object, found by name; any other group
// makes it a vendor kind, found through generatedFrom.
func TestCatalogBuiltinGroups(t *testing.T) {
	small := catalogClaimParams("default", "small", nil)
	cp := catalogClassParams("cp", nil)
	cat := allocator.NewCatalog(&allocator.Snapshot{
		ClaimParameters: []*resourceapi.ResourceClaimParameters{small},
		ClassParameters: []*resourceapi.ResourceClassParameters{cp},
	})
	for _, tc := range []struct {
		group string
		found bool
	}{{"", true}, {resourceapi.GroupName, true}, {"gpu.example.com", false}} {
		got, raw := cat.ClaimParameters("default", &resourceapi.ResourceClaimParametersReference{APIGroup: tc.group, Kind: "ResourceClaimParameters", Name: "small"})
		if (got == small) != tc.found || raw != nil {
			t.Errorf("claim parameters of group %q: got %v (vendor %v), want found %v", tc.group, got.GetName(), raw, tc.found)
		}
		gotClass, raw := cat.ClassParameters(&resourceapi.ResourceClassParametersReference{APIGroup: tc.group, Kind: "ResourceClassParameters", Name: "cp"})
		if (gotClass == cp) != tc.found || raw != nil {
			t.Errorf("class parameters of group %q: got %v (vendor %v), want found %v", tc.group, gotClass.GetName(), raw, tc.found)
		}
	}
	// Claim parameters are found in the claim's namespace only.
	if got, _ := cat.ClaimParameters("other", &resourceapi.ResourceClaimParametersReference{Kind: "ResourceClaimParameters", Name: "small"}); got != nil {
		t.Errorf("claim parameters in another namespace: got %s, want none", got.Name)
	}
}

// A vendor reference finds the parameters generated from it (in the
// claim's namespace for claim parameters) and, when the catalog has the
// vendor object, its JSON.
func TestCatalogVendorObjects(t *testing.T) {
	claimRef := &resourceapi.ResourceClaimParametersReference{APIGroup: "gpu.example.com", Kind: "GpuClaimParameters", Name: "p"}
	classRef := &resourceapi.ResourceClassParametersReference{APIGroup: "gpu.example.com", Kind: "GpuClassParameters", Name: "p", Namespace: "drivers"}
	gen := catalogClaimParams("default", "gen", claimRef)
	genOther := catalogClaimParams("other", "gen", claimRef)
	genClass := catalogClassParams("gen", classRef)
	vendorClaim, vendorClass := vendorObject("GpuClaimParameters", "default", "p"), vendorObject("GpuClassParameters", "drivers", "p")
	cat := allocator.NewCatalog(&allocator.Snapshot{
		ClaimParameters:  []*resourceapi.ResourceClaimParameters{genOther, gen},
		ClassParameters:  []*resourceapi.ResourceClassParameters{genClass},
		VendorParameters: []*unstructured.Unstructured{vendorClaim, vendorClass},
	})
	wantJSON := func(t *testing.T, what string, raw []byte, u *unstructured.Unstructured) {
		t.Helper()
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, u.Object) {
			t.Errorf("%s vendor snapshot = %s (%v), want the vendor object", what, raw, err)
		}
	}
	p, raw := cat.ClaimParameters("default", claimRef)
	if p != gen || raw == nil {
		t.Fatalf("claim parameters = %v, vendor %v; want gen and the vendor object", p.GetName(), raw)
	}
	wantJSON(t, "claim", raw.Raw, vendorClaim)
	if p, raw := cat.ClaimParameters("other", claimRef); p != genOther || raw != nil {
		t.Errorf("claim parameters in other = %v/%v, vendor %v; want other/gen without a vendor object", p.GetNamespace(), p.GetName(), raw)
	}
	cp, raw := cat.ClassParameters(classRef)
	if cp != genClass || raw == nil {
		t.Fatalf("class parameters = %v, vendor %v; want gen and the vendor object", cp.GetName(), raw)
	}
	wantJSON(t, "class", raw.Raw, vendorClass)
	other := *claimRef
	other.Name = "q"
	if p, raw := cat.ClaimParameters("default", &other); p != nil || raw != nil {
		t.Errorf("claim parameters of a vendor object nothing was generated from = %v, vendor %v; want none", p.GetName(), raw)
	}

	// Resolve fills in the same.
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, ParametersRef: classRef}
	cat = allocator.NewCatalog(&allocator.Snapshot{
		Classes:          []*resourceapi.ResourceClass{class},
		ClaimParameters:  []*resourceapi.ResourceClaimParameters{gen},
		ClassParameters:  []*resourceapi.ResourceClassParameters{genClass},
		VendorParameters: []*unstructured.Unstructured{vendorClaim, vendorClass},
	})
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"},
		Spec:       resourceapi.ResourceClaimSpec{ResourceClassName: "gpu", ParametersRef: claimRef},
	}
	c, missing := cat.Resolve(claim)
	if missing != nil || c.Claim != claim || c.Class != class || c.ClaimParameters != gen || c.ClassParameters != genClass ||
		c.VendorClaimParameters == nil || c.VendorClassParameters == nil {
		t.Fatalf("Resolve = %+v, missing %v; want everything", c, missing)
	}
	wantJSON(t, "resolved claim", c.VendorClaimParameters.Raw, vendorClaim)
	wantJSON(t, "resolved class", c.VendorClassParameters.Raw, vendorClass)
}

// Resolve reports everything missing, the class first, then the claim's
// parameters, then the class's (looked for only when the class is there).
func TestCatalogResolveMissing(t *testing.T) {
	classRef := &resourceapi.ResourceClassParametersReference{Kind: "ResourceClassParameters", Name: "cp"}
	claimRef := &resourceapi.ResourceClaimParametersReference{APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: "small"}
	withParams := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, ParametersRef: classRef}
	plain := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	small := catalogClaimParams("default", "small", nil)
	claim := func(class string, ref *resourceapi.ResourceClaimParametersReference) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"},
			Spec:       resourceapi.ResourceClaimSpec{ResourceClassName: class, ParametersRef: ref},
		}
	}
	noClass := allocator.Missing{Kind: allocator.MissingClass, Claim: "default/c", Class: "none"}
	noClaimParams := func(class string) allocator.Missing {
		return allocator.Missing{Kind: allocator.MissingClaimParameters, Claim: "default/c", Class: class, RefKind: "ResourceClaimParameters", RefName: "small"}
	}
	noClassParams := allocator.Missing{Kind: allocator.MissingClassParameters, Claim: "default/c", Class: "gpu", RefKind: "ResourceClassParameters", RefName: "cp"}
	full := &allocator.Snapshot{Classes: []*resourceapi.ResourceClass{withParams, plain}, ClaimParameters: []*resourceapi.ResourceClaimParameters{small}}
	empty := &allocator.Snapshot{Classes: []*resourceapi.ResourceClass{withParams, plain}}
	for name, tc := range map[string]struct {
		snap  *allocator.Snapshot
		claim *resourceapi.ResourceClaim
		want  []allocator.Missing
	}{
		"nothing missing":                       {full, claim("plain", claimRef), nil},
		"no parameters referenced":              {empty, claim("plain", nil), nil},
		"class":                                 {full, claim("none", claimRef), []allocator.Missing{noClass}},
		"class and claim parameters":            {empty, claim("none", claimRef), []allocator.Missing{noClass, noClaimParams("none")}},
		"claim parameters":                      {empty, claim("plain", claimRef), []allocator.Missing{noClaimParams("plain")}},
		"class parameters":                      {full, claim("gpu", claimRef), []allocator.Missing{noClassParams}},
		"claim parameters and class parameters": {empty, claim("gpu", claimRef), []allocator.Missing{noClaimParams("gpu"), noClassParams}},
	} {
		t.Run(name, func(t *testing.T) {
			c, missing := allocator.NewCatalog(tc.snap).Resolve(tc.claim)
			if !reflect.DeepEqual(missing, tc.want) {
				t.Errorf("missing = %+v, want %+v", missing, tc.want)
			}
			if want := tc.claim.Spec.ParametersRef != nil && tc.snap == full; (c.ClaimParameters == small) != want {
				t.Errorf("claim parameters = %v, want found %v", c.ClaimParameters.GetName(), want)
			}
		})
	}
}

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
