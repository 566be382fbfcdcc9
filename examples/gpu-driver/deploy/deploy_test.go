package deploy_test

import (
	"bytes"
	"strings"
	"testing"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/examples/gpu-driver/deploy"
	"allot.dev/allot/examples/gpu-driver/translator"
	"allot.dev/allot/pkg/allocator"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// decode splits and strictly decodes one manifest.
func decode(t *testing.T, data []byte) []runtime.Object {
	t.Helper()
	docs, err := scheme.SplitYAML(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for i, d := range docs {
		obj, _, err := scheme.Decode(d)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// crdSchema is the schema of the embedded CRD's only version.
func crdSchema(t *testing.T) *apiextv1.CustomResourceDefinition {
	t.Helper()
	objs := decode(t, deploy.CRD)
	if len(objs) != 1 {
		t.Fatalf("crd.yaml holds %d objects, want 1", len(objs))
	}
	crd, ok := objs[0].(*apiextv1.CustomResourceDefinition)
	if !ok {
		t.Fatalf("crd.yaml holds a %T", objs[0])
	}
	return crd
}

// admit defaults and validates obj as the API server does; custom
// resources against the CRD's schema.
func admit(crd *apiextv1.CustomResourceDefinition, obj runtime.Object) []string {
	validation.Default(obj)
	errs := validation.Validate(obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		s := validation.CustomResourceSchema(crd, translator.Version)
		validation.DefaultCustomResource(s, u.Object)
		errs = append(errs, validation.ValidateCustomResource(s, u.Object)...)
	}
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestManifestsValidate(t *testing.T) {
	validation.SetSelectorCompiler(allocator.CompileSelector)
	t.Cleanup(func() { validation.SetSelectorCompiler(nil) })
	crd := crdSchema(t)
	if crd.Spec.Group != translator.Group || crd.Spec.Names.Kind != translator.Kind || crd.Spec.Names.Plural != translator.Resource ||
		crd.Spec.Scope != apiextv1.NamespaceScoped || crd.Spec.Versions[0].Name != translator.Version {
		t.Fatalf("CRD names %s/%s %s (%s), want the translator's", crd.Spec.Group, crd.Spec.Versions[0].Name, crd.Spec.Names.Kind, crd.Spec.Scope)
	}
	var names []string
	for _, m := range deploy.All() {
		names = append(names, m.Name)
		for i, obj := range decode(t, m.Data) {
			if errs := admit(crd, obj); len(errs) > 0 {
				t.Errorf("%s document %d: %v", m.Name, i, errs)
			}
		}
	}
	if got := strings.Join(names, ","); got != "crd.yaml,class.yaml,example/gpu-pair.yaml" {
		t.Errorf("All() = %s", got)
	}
}

// TestExampleFitsTogether: the class is structured, its parameters exist,
// the template's claim refers to the example GpuClaimParameters through
// the class, and both containers of the pod use the claim; the
// GpuClaimParameters translates.
func TestExampleFitsTogether(t *testing.T) {
	crd := crdSchema(t)
	class := decode(t, deploy.Class)
	rc, ok := class[0].(*resourceapi.ResourceClass)
	if !ok || rc.DriverName != translator.DriverName || rc.ControllerName != "" || rc.ParametersRef == nil {
		t.Fatalf("class.yaml[0] = %#v, want a structured class of %s with parameters", class[0], translator.DriverName)
	}
	rcp, ok := class[1].(*resourceapi.ResourceClassParameters)
	if !ok || rcp.Name != rc.ParametersRef.Name || rc.ParametersRef.Kind != "ResourceClassParameters" {
		t.Fatalf("class.yaml[1] = %#v is not the class's parametersRef %+v", class[1], rc.ParametersRef)
	}
	if v := string(rcp.VendorParameters.Raw); !strings.Contains(v, `"kind":"GpuClassParameters"`) || !strings.Contains(v, `"initCommand":[`) {
		t.Errorf("class vendorParameters = %s, want GpuClassParameters with initCommand", v)
	}

	objs := decode(t, deploy.Example)
	params, ok := objs[0].(*unstructured.Unstructured)
	if !ok || params.GetKind() != translator.Kind {
		t.Fatalf("gpu-pair.yaml[0] = %T, want a GpuClaimParameters", objs[0])
	}
	admit(crd, params) // defaults
	p, err := translator.Translate(params)
	if err != nil {
		t.Fatalf("Translate(example) = %v", err)
	}
	if sel := p.Requests[0].Partitionable.Required[0].Selector; sel != `versions["runtimeVersion"] >= "11.0.0" && quantities["memory"] >= "16Gi"` || !p.Shareable {
		t.Errorf("translation: selector %s, shareable %v", sel, p.Shareable)
	}
	tmpl, ok := objs[1].(*resourceapi.ResourceClaimTemplate)
	if !ok {
		t.Fatalf("gpu-pair.yaml[1] = %T, want a ResourceClaimTemplate", objs[1])
	}
	spec := tmpl.Spec.Spec
	if spec.ResourceClassName != rc.Name || spec.ParametersRef == nil ||
		*spec.ParametersRef != (resourceapi.ResourceClaimParametersReference{APIGroup: translator.Group, Kind: translator.Kind, Name: params.GetName()}) {
		t.Errorf("template spec = %+v, want class %s and the example parameters", spec, rc.Name)
	}
	pod, ok := objs[2].(*corev1.Pod)
	if !ok {
		t.Fatalf("gpu-pair.yaml[2] = %T, want a Pod", objs[2])
	}
	if len(pod.Spec.ResourceClaims) != 1 || pod.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil ||
		*pod.Spec.ResourceClaims[0].ResourceClaimTemplateName != tmpl.Name {
		t.Fatalf("pod claims = %+v, want one from template %s", pod.Spec.ResourceClaims, tmpl.Name)
	}
	if len(pod.Spec.Containers) != 2 {
		t.Fatalf("pod has %d containers, want 2", len(pod.Spec.Containers))
	}
	for _, c := range pod.Spec.Containers {
		if len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != pod.Spec.ResourceClaims[0].Name {
			t.Errorf("container %s claims %+v, want the pod's claim", c.Name, c.Resources.Claims)
		}
	}
}

// TestSchemaRejects: the CRD's schema turns away what the translator could
// not use, naming the field.
func TestSchemaRejects(t *testing.T) {
	crd := crdSchema(t)
	tests := map[string]struct {
		spec string
		want string
	}{
		"count zero":         {`count: 0`, "spec.count"},
		"count nine":         {`count: 9`, "spec.count"},
		"count a string":     {`count: "2"`, "spec.count"},
		"negative memory":    {`minimumMemory: -8Gi`, "spec.minimumMemory"},
		"memory not a shape": {`minimumMemory: lots`, "spec.minimumMemory"},
		"version not digits": {`minimumRuntimeVersion: latest`, "spec.minimumRuntimeVersion"},
		"unknown strategy":   {`sharing: {strategy: TimeSliced}`, "spec.sharing.strategy"},
		"unknown field":      {`colour: red`, "spec.colour"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := decode(t, []byte("apiVersion: gpu.example.com/v1alpha1\nkind: GpuClaimParameters\nmetadata: {name: p, namespace: ns}\nspec: {"+tc.spec+"}\n"))[0]
			errs := admit(crd, obj)
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "; "), tc.want) {
				t.Fatalf("errors %v, want one about %s", errs, tc.want)
			}
		})
	}
	// Defaults: one exclusive GPU.
	obj := decode(t, []byte("apiVersion: gpu.example.com/v1alpha1\nkind: GpuClaimParameters\nmetadata: {name: p, namespace: ns}\n"))[0]
	if errs := admit(crd, obj); len(errs) > 0 {
		t.Fatalf("empty spec: %v", errs)
	}
	u := obj.(*unstructured.Unstructured)
	count, _, _ := unstructured.NestedInt64(u.Object, "spec", "count")
	strategy, _, _ := unstructured.NestedString(u.Object, "spec", "sharing", "strategy")
	if count != 1 || strategy != translator.StrategyExclusive {
		t.Fatalf("defaults: count %d, strategy %q, want 1 and Exclusive", count, strategy)
	}
}
