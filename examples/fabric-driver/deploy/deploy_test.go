package deploy_test

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/examples/fabric-driver/deploy"
	"allot.dev/allot/examples/fabric-driver/fabricdriver"
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

func crd(t *testing.T) *apiextv1.CustomResourceDefinition {
	t.Helper()
	objs := decode(t, deploy.CRD)
	c, ok := objs[0].(*apiextv1.CustomResourceDefinition)
	if len(objs) != 1 || !ok {
		t.Fatalf("crd.yaml holds %v, want one CRD", objs)
	}
	return c
}

// admit defaults and validates obj as the API server does; custom
// resources against the CRD's schema.
func admit(c *apiextv1.CustomResourceDefinition, obj runtime.Object) []string {
	validation.Default(obj)
	errs := validation.Validate(obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		s := validation.CustomResourceSchema(c, fabricdriver.Version)
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
	c := crd(t)
	if c.Spec.Group != fabricdriver.Group || c.Spec.Names.Kind != fabricdriver.Kind || c.Spec.Names.Plural != fabricdriver.Resource ||
		c.Spec.Scope != apiextv1.NamespaceScoped || c.Spec.Versions[0].Name != fabricdriver.Version {
		t.Fatalf("CRD names %s/%s %s (%s), want the driver's", c.Spec.Group, c.Spec.Versions[0].Name, c.Spec.Names.Kind, c.Spec.Scope)
	}
	var names []string
	for _, m := range deploy.All() {
		names = append(names, m.Name)
		for i, obj := range decode(t, m.Data) {
			if errs := admit(c, obj); len(errs) > 0 {
				t.Errorf("%s document %d: %v", m.Name, i, errs)
			}
		}
	}
	if got := strings.Join(names, ","); got != "crd.yaml,class.yaml,example/fabric-pair.yaml" {
		t.Errorf("All() = %s", got)
	}
}

// TestExampleFitsTogether: the class is a control-plane class of the
// driver; the templates refer to the example parameters through it; the
// pod's container uses both claims; the parameters parse as the
// controller reads them.
func TestExampleFitsTogether(t *testing.T) {
	c := crd(t)
	class, ok := decode(t, deploy.Class)[0].(*resourceapi.ResourceClass)
	if !ok || class.DriverName != fabricdriver.DriverName || class.ControllerName != fabricdriver.DriverName || class.ParametersRef != nil {
		t.Fatalf("class.yaml = %+v, want driver and controller %s, no parameters", class, fabricdriver.DriverName)
	}
	objs := decode(t, deploy.Example)
	params := map[string]*fabricdriver.ClaimParameters{}
	templates := map[string]bool{}
	var pod *corev1.Pod
	for _, obj := range objs {
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			admit(c, o) // defaults
			p, err := fabricdriver.ParseClaimParameters(o)
			if err != nil {
				t.Fatalf("%s: %v", o.GetName(), err)
			}
			params[o.GetName()] = p
		case *resourceapi.ResourceClaimTemplate:
			ref := o.Spec.Spec.ParametersRef
			if o.Spec.Spec.ResourceClassName != class.Name || ref == nil || ref.APIGroup != fabricdriver.Group ||
				ref.Kind != fabricdriver.Kind || params[ref.Name] == nil {
				t.Errorf("template %s: spec %+v, want the class and example parameters", o.Name, o.Spec.Spec)
			}
			templates[o.Name] = true
		case *corev1.Pod:
			pod = o
		}
	}
	if p := params["two-fpgas"]; p == nil || *p != (fabricdriver.ClaimParameters{Count: 2, Model: "fpga-a"}) {
		t.Errorf("two-fpgas = %+v", p)
	}
	if p := params["maybe-a-gpu"]; p == nil || *p != (fabricdriver.ClaimParameters{Count: 1, Model: "gpu-b", Optional: true}) {
		t.Errorf("maybe-a-gpu = %+v", p)
	}
	if pod == nil || len(pod.Spec.ResourceClaims) != 2 || len(pod.Spec.Containers[0].Resources.Claims) != 2 {
		t.Fatalf("pod = %+v, want two claims used by its container", pod)
	}
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil || !templates[*rc.ResourceClaimTemplateName] {
			t.Errorf("pod claim %s does not come from an example template", rc.Name)
		}
	}
}

// TestSchemaRejects: the CRD's schema turns away what the controller
// could not use, naming the field; an empty spec defaults to one unit.
func TestSchemaRejects(t *testing.T) {
	c := crd(t)
	tests := map[string]struct{ spec, want string }{
		"count zero":        {`count: 0`, "spec.count"},
		"count seventeen":   {`count: 17`, "spec.count"},
		"count a string":    {`count: "2"`, "spec.count"},
		"model too long":    {`model: ` + strings.Repeat("m", 64), "spec.model"},
		"optional a string": {`optional: "yes"`, "spec.optional"},
		"unknown field":     {`colour: red`, "spec.colour"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := decode(t, []byte("apiVersion: fabric.example.com/v1alpha1\nkind: FabricClaimParameters\nmetadata: {name: p, namespace: ns}\nspec: {"+tc.spec+"}\n"))[0]
			errs := admit(c, obj)
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "; "), tc.want) {
				t.Fatalf("errors %v, want one about %s", errs, tc.want)
			}
		})
	}
	obj := decode(t, []byte("apiVersion: fabric.example.com/v1alpha1\nkind: FabricClaimParameters\nmetadata: {name: p, namespace: ns}\n"))[0]
	if errs := admit(c, obj); len(errs) > 0 {
		t.Fatalf("empty spec: %v", errs)
	}
	p, err := fabricdriver.ParseClaimParameters(obj.(*unstructured.Unstructured))
	if err != nil || *p != (fabricdriver.ClaimParameters{Count: 1}) {
		t.Fatalf("defaults: %+v, %v; want one unit of any model", p, err)
	}
}
