package translator

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// create stores a GpuClaimParameters as the admin (a user) would.
func create(t *testing.T, ns string, b paramsBuilder) *unstructured.Unstructured {
	t.Helper()
	out, err := vendorClient(ns).Create(testContext(t), b.ns(ns).obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", Kind, err)
	}
	return out
}

// waitTranslation waits until the translation of ns/name satisfies cond.
func waitTranslation(t *testing.T, ns, name, what string, cond func(*resourceapi.ResourceClaimParameters) bool) *resourceapi.ResourceClaimParameters {
	t.Helper()
	var got *resourceapi.ResourceClaimParameters
	eventually(t, what, func() bool {
		p, err := admin.ResourceClaimParameters(ns).Get(testContext(t), name)
		if isNotFound(t, err) {
			return false
		}
		got = p
		return cond(p)
	})
	return got
}

func selectors(p *resourceapi.ResourceClaimParameters) []string {
	var out []string
	for _, r := range p.Requests {
		if r.Partitionable == nil {
			continue
		}
		for _, req := range r.Partitionable.Required {
			out = append(out, req.Selector)
		}
	}
	return out
}

func vendorSpec(t *testing.T, p *resourceapi.ResourceClaimParameters) map[string]any {
	t.Helper()
	var v struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	if p.VendorParameters == nil || json.Unmarshal(p.VendorParameters.Raw, &v) != nil ||
		v.APIVersion != Group+"/"+Version || v.Kind != Kind {
		t.Fatalf("vendorParameters = %v, want a GpuClaimParameters", p.VendorParameters)
	}
	return v.Spec
}

// TestCreateAndUpdate: a new GpuClaimParameters is translated; changing
// its spec changes the translation; an edit of the translation behind the
// translator's back is undone; deleting the source deletes the translation
// (garbage collection through the owner reference).
func TestCreateAndUpdate(t *testing.T) {
	ns := newNamespace(t)
	startTranslator(t, ns)
	src := create(t, ns, gpuParams("two").count(2).memory("16Gi").runtime("v11").strategy(StrategyTimeSlicing))

	want := `versions["runtimeVersion"] >= "11.0.0" && quantities["memory"] >= "16Gi"`
	p := waitTranslation(t, ns, "two", "the translation", func(p *resourceapi.ResourceClaimParameters) bool { return true })
	if got := selectors(p); len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("selectors = %q, want two of %q", got, want)
	}
	for _, s := range selectors(p) {
		if err := allocator.CompileSelector(s); err != nil {
			t.Fatalf("selector %q: %v", s, err)
		}
	}
	if p.Requests[0].DriverName != DriverName || !p.Shareable {
		t.Errorf("driver %s, shareable %v; want %s, true", p.Requests[0].DriverName, p.Shareable, DriverName)
	}
	if g := p.GeneratedFrom; g == nil || *g != (resourceapi.ResourceClaimParametersReference{APIGroup: Group, Kind: Kind, Name: "two"}) {
		t.Errorf("generatedFrom = %+v", g)
	}
	if c := metav1.GetControllerOf(p); c == nil || c.UID != src.GetUID() || c.Kind != Kind {
		t.Errorf("controller = %+v, want the GpuClaimParameters %s", c, src.GetUID())
	}
	if spec := vendorSpec(t, p); spec["count"] != float64(2) || spec["minimumMemory"] != "16Gi" {
		t.Errorf("vendorParameters.spec = %v", spec)
	}
	eventually(t, "a Translated event", func() bool {
		_, ok := findEvent(t, ns, "two", ReasonTranslated, "created ResourceClaimParameters "+ns+"/two")
		return ok
	})

	// Update: three exclusive instances of at least 8Gi.
	src, err := vendorClient(ns).Get(testContext(t), "two", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(src.Object, int64(3), "spec", "count")
	_ = unstructured.SetNestedField(src.Object, "8Gi", "spec", "minimumMemory")
	unstructured.RemoveNestedField(src.Object, "spec", "minimumRuntimeVersion")
	_ = unstructured.SetNestedField(src.Object, StrategyExclusive, "spec", "sharing", "strategy")
	if _, err := vendorClient(ns).Update(testContext(t), src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitTranslation(t, ns, "two", "the updated translation", func(p *resourceapi.ResourceClaimParameters) bool {
		s := selectors(p)
		return len(s) == 3 && s[2] == `quantities["memory"] >= "8Gi"` && !p.Shareable
	})
	if spec := vendorSpec(t, p); spec["count"] != float64(3) || spec["minimumRuntimeVersion"] != nil {
		t.Errorf("vendorParameters.spec = %v, want the updated spec", spec)
	}

	// An edit behind the translator's back is undone.
	edited := p.DeepCopy()
	edited.Requests[0].Partitionable.Required = edited.Requests[0].Partitionable.Required[:1]
	edited.Shareable = true
	if _, err := admin.ResourceClaimParameters(ns).Update(testContext(t), edited); err != nil {
		t.Fatal(err)
	}
	waitTranslation(t, ns, "two", "the edit undone", func(p *resourceapi.ResourceClaimParameters) bool {
		return len(selectors(p)) == 3 && !p.Shareable && p.ResourceVersion != edited.ResourceVersion
	})

	if err := vendorClient(ns).Delete(testContext(t), "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the garbage collector to delete the translation", func() bool {
		_, err := admin.ResourceClaimParameters(ns).Get(testContext(t), "two")
		return isNotFound(t, err)
	})
}

// TestUnrelatedNotAdopted: a ResourceClaimParameters of the same name that
// the translator did not generate stays as it is, and the GpuClaimParameters
// gets a Warning event; once it is gone, the translation is created.
func TestUnrelatedNotAdopted(t *testing.T) {
	ns := newNamespace(t)
	theirs := &resourceapi.ResourceClaimParameters{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns, Labels: map[string]string{"owner": "someone"}},
		Requests: []resourceapi.ResourceRequest{{DriverName: DriverName, ResourceRequestModel: resourceapi.ResourceRequestModel{
			Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{{Selector: "true"}}},
		}}},
	}
	theirs, err := admin.ResourceClaimParameters(ns).Create(testContext(t), theirs)
	if err != nil {
		t.Fatal(err)
	}
	// Also one generated from another group that uses this kind's name.
	other := &resourceapi.ResourceClaimParameters{
		ObjectMeta:    metav1.ObjectMeta{Name: "other", Namespace: ns},
		GeneratedFrom: &resourceapi.ResourceClaimParametersReference{APIGroup: "other.example.com", Kind: Kind, Name: "other"},
	}
	if other, err = admin.ResourceClaimParameters(ns).Create(testContext(t), other); err != nil {
		t.Fatal(err)
	}
	startTranslator(t, ns)
	create(t, ns, gpuParams("taken").memory("16Gi"))
	create(t, ns, gpuParams("other"))

	for _, name := range []string{"taken", "other"} {
		eventually(t, "a TranslationConflict event about "+name, func() bool {
			ev, ok := findEvent(t, ns, name, ReasonTranslationConflict, "ResourceClaimParameters "+ns+"/"+name, "not overwriting")
			return ok && ev.Type == corev1.EventTypeWarning
		})
	}
	for _, want := range []*resourceapi.ResourceClaimParameters{theirs, other} {
		got, err := admin.ResourceClaimParameters(ns).Get(testContext(t), want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != want.ResourceVersion || len(got.OwnerReferences) != 0 {
			t.Errorf("%s was changed: resourceVersion %s -> %s, owners %v", want.Name, want.ResourceVersion, got.ResourceVersion, got.OwnerReferences)
		}
	}

	if err := admin.ResourceClaimParameters(ns).Delete(testContext(t), "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTranslation(t, ns, "taken", "the translation once the name is free", func(p *resourceapi.ResourceClaimParameters) bool {
		return p.GeneratedFrom != nil && p.GeneratedFrom.Name == "taken" && selectors(p)[0] == `quantities["memory"] >= "16Gi"`
	})
}

// TestInvalidSpec: an invalid spec gets a Warning event naming the field
// and no translation; a spec that becomes invalid loses its translation.
func TestInvalidSpec(t *testing.T) {
	ns := newNamespace(t)
	startTranslator(t, ns)
	// "8GiGi" has a quantity's shape, so the CRD's schema lets it through.
	create(t, ns, gpuParams("bad").memory("8GiGi"))
	eventually(t, "an InvalidParameters event", func() bool {
		ev, ok := findEvent(t, ns, "bad", ReasonInvalidParameters, `spec.minimumMemory: Invalid value: "8GiGi"`, "no ResourceClaimParameters generated")
		return ok && ev.Type == corev1.EventTypeWarning
	})
	if _, err := admin.ResourceClaimParameters(ns).Get(testContext(t), "bad"); !isNotFound(t, err) {
		t.Fatal("an invalid GpuClaimParameters was translated")
	}

	create(t, ns, gpuParams("later").runtime("v11"))
	waitTranslation(t, ns, "later", "the translation", func(*resourceapi.ResourceClaimParameters) bool { return true })
	src, err := vendorClient(ns).Get(testContext(t), "later", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(src.Object, "v12.x", "spec", "minimumRuntimeVersion")
	if _, err := vendorClient(ns).Update(testContext(t), src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an InvalidParameters event naming the version", func() bool {
		_, ok := findEvent(t, ns, "later", ReasonInvalidParameters, `spec.minimumRuntimeVersion: Invalid value: "v12.x"`)
		return ok
	})
	eventually(t, "the outdated translation deleted", func() bool {
		_, err := admin.ResourceClaimParameters(ns).Get(testContext(t), "later")
		return isNotFound(t, err)
	})
}

// TestReplacesPredecessorsTranslation: a translation left behind by a
// deleted GpuClaimParameters of the same name is replaced.
func TestReplacesPredecessorsTranslation(t *testing.T) {
	ns := newNamespace(t)
	yes := true
	old := &resourceapi.ResourceClaimParameters{
		ObjectMeta: metav1.ObjectMeta{Name: "again", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: Group + "/" + Version, Kind: Kind, Name: "again", UID: "0a0a0a0a-dead-beef-0000-000000000000", Controller: &yes,
		}}},
		GeneratedFrom: generatedFrom("again"),
	}
	if _, err := admin.ResourceClaimParameters(ns).Create(testContext(t), old); err != nil {
		t.Fatal(err)
	}
	startTranslator(t, ns)
	src := create(t, ns, gpuParams("again").count(2))
	waitTranslation(t, ns, "again", "the new translation", func(p *resourceapi.ResourceClaimParameters) bool {
		c := metav1.GetControllerOf(p)
		return c != nil && c.UID == src.GetUID() && len(selectors(p)) == 2
	})
}

// TestDriverToken: the token the translators run with is a driver token
// for gpu.example.com, not an admin's: it may not write parameters that
// are not generated from its API group.
func TestDriverToken(t *testing.T) {
	ns := newNamespace(t)
	for name, gen := range map[string]*resourceapi.ResourceClaimParametersReference{
		"no generatedFrom": nil,
		"another group":    {APIGroup: "other.example.com", Kind: "OtherParameters", Name: "x"},
	} {
		p := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, GeneratedFrom: gen}
		_, err := driver.ResourceClaimParameters(ns).Create(testContext(t), p)
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("%s: driver create = %v, want forbidden", name, err)
		}
	}
	p := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, GeneratedFrom: generatedFrom("mine")}
	if _, err := driver.ResourceClaimParameters(ns).Create(testContext(t), p); err != nil {
		t.Errorf("driver create of its own parameters = %v", err)
	}
}

// TestDeployExample: the deploy example's manifest is accepted by the API
// server as a user applies it, its GpuClaimParameters is translated, and
// the claim generated for its pod refers to it.
func TestDeployExample(t *testing.T) {
	ns := newNamespace(t)
	startTranslator(t, ns)
	if out, err := allot(testContext(t), "apply", "-n", ns, "-f", "../deploy/example/gpu-pair.yaml"); err != nil {
		t.Fatalf("allot apply: %v\n%s", err, out)
	}
	p := waitTranslation(t, ns, "shared-gpu", "the example's translation", func(*resourceapi.ResourceClaimParameters) bool { return true })
	if s := selectors(p); len(s) != 1 || s[0] != `versions["runtimeVersion"] >= "11.0.0" && quantities["memory"] >= "16Gi"` || !p.Shareable {
		t.Fatalf("selectors %q, shareable %v", s, p.Shareable)
	}
	eventually(t, "the pod's claim", func() bool {
		pod, err := admin.Pods(ns).Get(testContext(t), "gpu-pair")
		if err != nil {
			t.Fatal(err)
		}
		st := pod.Status.ResourceClaimStatuses
		if len(st) != 1 || st[0].ResourceClaimName == nil {
			return false
		}
		c, err := admin.ResourceClaims(ns).Get(testContext(t), *st[0].ResourceClaimName)
		if isNotFound(t, err) {
			return false
		}
		ref := c.Spec.ParametersRef
		return c.Spec.ResourceClassName == DriverName && ref != nil && *ref == *generatedFrom("shared-gpu")
	})
}
