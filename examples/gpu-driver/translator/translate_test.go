package translator

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/pkg/allocator"
)

// gpuParams builds GpuClaimParameters objects for tests:
// gpuParams("p").count(2).memory("16Gi").obj().
type paramsBuilder struct{ u *unstructured.Unstructured }

func gpuParams(name string) paramsBuilder {
	return paramsBuilder{&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{},
	}}}
}

func (b paramsBuilder) set(v any, path ...string) paramsBuilder {
	if err := unstructured.SetNestedField(b.u.Object, v, append([]string{"spec"}, path...)...); err != nil {
		panic(err)
	}
	return b
}

func (b paramsBuilder) count(n int64) paramsBuilder     { return b.set(n, "count") }
func (b paramsBuilder) memory(q string) paramsBuilder   { return b.set(q, "minimumMemory") }
func (b paramsBuilder) runtime(v string) paramsBuilder  { return b.set(v, "minimumRuntimeVersion") }
func (b paramsBuilder) strategy(s string) paramsBuilder { return b.set(s, "sharing", "strategy") }
func (b paramsBuilder) ns(ns string) paramsBuilder      { b.u.SetNamespace(ns); return b }
func (b paramsBuilder) uid(uid types.UID) paramsBuilder { b.u.SetUID(uid); return b }
func (b paramsBuilder) obj() *unstructured.Unstructured { return b.u }
func (b paramsBuilder) without(path ...string) paramsBuilder {
	unstructured.RemoveNestedField(b.u.Object, path...)
	return b
}

func TestTranslate(t *testing.T) {
	tests := map[string]struct {
		in        *unstructured.Unstructured
		selector  string
		count     int
		shareable bool
	}{
		"seed 002's parameters": {
			in:       gpuParams("p").count(2).runtime("v12.0.0").memory("8Gi").strategy(StrategyTimeSlicing).obj(),
			selector: `versions["runtimeVersion"] >= "12.0.0" && quantities["memory"] >= "8Gi"`, count: 2, shareable: true,
		},
		"memory only, canonical": {
			in:       gpuParams("p").memory("16384Mi").obj(),
			selector: `quantities["memory"] >= "16Gi"`, count: 1,
		},
		"version only, tolerant": {
			in:       gpuParams("p").runtime(" v11 ").strategy(StrategySpacePartitioning).obj(),
			selector: `versions["runtimeVersion"] >= "11.0.0"`, count: 1, shareable: true,
		},
		"nothing asked":       {in: gpuParams("p").obj(), selector: "true", count: 1},
		"no spec at all":      {in: gpuParams("p").without("spec").obj(), selector: "true", count: 1},
		"empty strings":       {in: gpuParams("p").memory("").runtime("").strategy("").obj(), selector: "true", count: 1},
		"exclusive, max":      {in: gpuParams("p").count(MaxCount).strategy(StrategyExclusive).obj(), selector: "true", count: MaxCount},
		"count as JSON float": {in: gpuParams("p").set(float64(3), "count").obj(), selector: "true", count: 3},
		"exponent":            {in: gpuParams("p").memory("1.5e9").obj(), selector: `quantities["memory"] >= "1500e6"`, count: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.in.SetNamespace("ns")
			tc.in.SetUID("uid-1")
			got, err := Translate(tc.in)
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			if got.Name != "p" || got.Namespace != "ns" {
				t.Errorf("name %s/%s, want ns/p", got.Namespace, got.Name)
			}
			if g := got.GeneratedFrom; g == nil || g.APIGroup != Group || g.Kind != Kind || g.Name != "p" {
				t.Errorf("generatedFrom = %+v", g)
			}
			ctrl := metav1.GetControllerOf(got)
			if ctrl == nil || ctrl.UID != "uid-1" || ctrl.Kind != Kind || ctrl.APIVersion != "gpu.example.com/v1alpha1" || ctrl.Name != "p" {
				t.Errorf("controller = %+v", ctrl)
			}
			if got.Shareable != tc.shareable {
				t.Errorf("shareable = %v, want %v", got.Shareable, tc.shareable)
			}
			if len(got.Requests) != 1 || got.Requests[0].DriverName != DriverName || got.Requests[0].Partitionable == nil {
				t.Fatalf("requests = %+v", got.Requests)
			}
			req := got.Requests[0].Partitionable.Required
			if len(req) != tc.count {
				t.Fatalf("%d required instances, want %d", len(req), tc.count)
			}
			for i, r := range req {
				if r.Name != "gpu-"+string(rune('0'+i)) || r.Selector != tc.selector {
					t.Errorf("required[%d] = %+v, want selector %s", i, r, tc.selector)
				}
			}
			if err := allocator.CompileSelector(tc.selector); err != nil {
				t.Errorf("selector does not compile: %v", err)
			}
			var vendor map[string]any
			if err := json.Unmarshal(got.VendorParameters.Raw, &vendor); err != nil {
				t.Fatal(err)
			}
			if vendor["apiVersion"] != "gpu.example.com/v1alpha1" || vendor["kind"] != Kind || len(vendor) != 3 {
				t.Errorf("vendorParameters = %s, want apiVersion, kind and spec", got.VendorParameters.Raw)
			}
			if spec, ok := vendor["spec"].(map[string]any); !ok || len(spec) != len(specMap(tc.in)) {
				t.Errorf("vendorParameters.spec = %v, want the object's spec %v", vendor["spec"], specMap(tc.in))
			}
		})
	}
}

func specMap(u *unstructured.Unstructured) map[string]any {
	m, _, _ := unstructured.NestedMap(u.Object, "spec")
	return m
}

func TestTranslateRejects(t *testing.T) {
	tests := map[string]struct {
		in   *unstructured.Unstructured
		want []string
	}{
		"unparsable quantity": {gpuParams("p").memory("8GiGi").obj(), []string{`spec.minimumMemory: Invalid value: "8GiGi": not a quantity`}},
		"quantity shape":      {gpuParams("p").memory("1.2.3Gi").obj(), []string{`spec.minimumMemory: Invalid value: "1.2.3Gi"`}},
		"huge exponent":       {gpuParams("p").memory("1e-99999999999").obj(), []string{`spec.minimumMemory: Invalid value: "1e-99999999999": not a quantity`}},
		"negative memory":     {gpuParams("p").memory("-8Gi").obj(), []string{"spec.minimumMemory", "must not be negative"}},
		"long memory":         {gpuParams("p").memory(strings.Repeat("1", 65)).obj(), []string{"spec.minimumMemory: Too long"}},
		"memory not a string": {gpuParams("p").set(int64(8), "minimumMemory").obj(), []string{"spec.minimumMemory", "must be a string"}},
		"bad version":         {gpuParams("p").runtime("v12.x").obj(), []string{`spec.minimumRuntimeVersion: Invalid value: "v12.x": not a semantic version`}},
		"count zero":          {gpuParams("p").count(0).obj(), []string{"spec.count: Invalid value: 0: must be between 1 and 8"}},
		"count nine":          {gpuParams("p").count(9).obj(), []string{"spec.count", "must be between 1 and 8"}},
		"count fraction":      {gpuParams("p").set(1.5, "count").obj(), []string{"spec.count", "must be an integer"}},
		"count string":        {gpuParams("p").set("2", "count").obj(), []string{"spec.count", "must be an integer"}},
		"unknown strategy":    {gpuParams("p").strategy("TimeSliced").obj(), []string{`spec.sharing.strategy: Unsupported value: "TimeSliced"`, "TimeSlicing"}},
		"sharing not a map":   {gpuParams("p").set("yes", "sharing").obj(), []string{"spec.sharing", "must be an object"}},
		"spec not a map":      {gpuParams("p").without("spec").set2("spec", "x"), []string{"spec: Invalid value", "must be an object"}},
		"several at once":     {gpuParams("p").count(0).memory("x").obj(), []string{"spec.count", "spec.minimumMemory"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Translate(tc.in)
			if err == nil {
				t.Fatalf("Translate = %+v, want an error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// set2 sets a top-level field, for malformed objects.
func (b paramsBuilder) set2(key string, v any) *unstructured.Unstructured {
	b.u.Object[key] = v
	return b.u
}
