package validation

import (
	"bytes"
	"testing"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/examples/manifests"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// seedDocs are the documents of seed 002's example (KEP-4381), the
// repository's one copy in examples/manifests.
func seedDocs(t testing.TB) [][]byte {
	t.Helper()
	docs, err := scheme.SplitYAML(bytes.NewReader(manifests.Seed002))
	if err != nil {
		t.Fatalf("split seed example: %v", err)
	}
	return docs
}

// seedObjects decodes the seed example afresh.
func seedObjects(t testing.TB) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for i, d := range seedDocs(t) {
		obj, _, err := scheme.Decode(d)
		if err != nil {
			t.Fatalf("decode document %d: %v", i, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// validateSeed defaults and validates every object; custom resources are
// checked against the schema of the CRD among them.
func validateSeed(objs []runtime.Object) field.ErrorList {
	var schema *apiextv1.JSONSchemaProps
	for _, obj := range objs {
		if crd, ok := obj.(*apiextv1.CustomResourceDefinition); ok {
			schema = CustomResourceSchema(crd, "v1alpha1")
		}
	}
	var errs field.ErrorList
	for _, obj := range objs {
		Default(obj)
		errs = append(errs, Validate(obj)...)
		if u, ok := obj.(*unstructured.Unstructured); ok {
			DefaultCustomResource(schema, u.Object)
			errs = append(errs, ValidateCustomResource(schema, u.Object)...)
		}
	}
	return errs
}

func TestSeedExampleValidates(t *testing.T) {
	objs := seedObjects(t)
	if len(objs) != 9 {
		t.Fatalf("seed has %d objects, want 9", len(objs))
	}
	expectErrs(t, validateSeed(objs))
	for _, obj := range objs {
		expectErrs(t, ValidateUpdate(obj, obj.DeepCopyObject()))
	}
}

func TestSeedExampleCorruptions(t *testing.T) {
	const inst1 = "spec.partitionable.resourceInstances[1]"
	for name, tc := range map[string]struct {
		corrupt func(runtime.Object)
		want    []string
	}{
		"namespace with dots": {corrupt: onNamespace(func(ns *corev1.Namespace) { ns.Name = "user.namespace" }), want: []string{"metadata.name: must not contain dots"}},
		"negative capacity":   {corrupt: onNode(func(n *corev1.Node) { n.Status.Capacity = rl("cpu=-64") }), want: []string{"status.capacity[cpu]"}},
		"instance name twice": {corrupt: onSlice(func(p *parts) { p.ResourceInstances[1].Name = "gpu-0" }), want: []string{inst1 + ".name: Duplicate"}},
		"seed's typo a4-quarters": {
			corrupt: onSlice(func(p *parts) {
				p.ResourceInstances[1].Partitions[2].ResourceInstances[1].Partitions[1].CommonAttributesRefs[0] = "a4-quarters"
			}),
			want: []string{inst1 + ".partitions[2].resourceInstances[1].partitions[1].commonAttributesRefs[0]: must be the name of an entry in spec.partitionable.commonAttributes"},
		},
		"bad version": {
			corrupt: onSlice(func(p *parts) { p.CommonAttributes[0].Attributes[1].Version = ptr("eleven") }),
			want:    []string{"spec.partitionable.commonAttributes[0].attributes[1].version"},
		},
		"attribute with two values": {
			corrupt: onSlice(func(p *parts) { p.CommonAttributes[0].Attributes[1].String = ptr("11.1.42") }),
			want:    []string{"spec.partitionable.commonAttributes[0].attributes[1]: found: `string`, `version`"},
		},
		"crd root not object": {
			corrupt: onCRD(func(c *apiextv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema.OpenAPIV3Schema.Type = "string" }),
			want: []string{
				"spec.versions[0].schema.openAPIV3Schema.type: must be object at the root",
				"spec.versions[0].schema.openAPIV3Schema.properties: only allowed for type object",
				"<root>: must be of type string", // the CardParameters against the broken schema
			},
		},
		"card count zero":    {corrupt: onCR(func(o map[string]interface{}) { spec(o)["count"] = int64(0) }), want: []string{"spec.count: greater than or equal to 1"}},
		"card count string":  {corrupt: onCR(func(o map[string]interface{}) { spec(o)["count"] = "two" }), want: []string{"spec.count: must be of type integer"}},
		"card unknown field": {corrupt: onCR(func(o map[string]interface{}) { spec(o)["sharing"].(map[string]interface{})["mode"] = "x" }), want: []string{"spec.sharing.mode: unknown field"}},
		"params no selector": {corrupt: onClaimParams(func(p *resourcev1alpha2.ResourceClaimParameters) {
			p.Requests[0].Partitionable.Required[1].Selector = ""
		}), want: []string{"requests[0].partitionable.required[1].selector: Required"}},
		"params generatedFrom": {corrupt: onClaimParams(func(p *resourcev1alpha2.ResourceClaimParameters) { p.GeneratedFrom.Kind = "" }), want: []string{"generatedFrom.kind: Required"}},
		"class without driver": {corrupt: onClass(func(c *resourcev1alpha2.ResourceClass) { c.DriverName = "" }), want: []string{"driverName: Required"}},
		"claim without class":  {corrupt: onClaim(func(c *resourcev1alpha2.ResourceClaim) { c.Spec.ResourceClassName = "" }), want: []string{"spec.resourceClassName: Required"}},
		"pod uses unknown claim": {
			corrupt: onPod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Claims[0].Name = "gpus" }),
			want:    []string{"spec.containers[0].resources.claims[0].name: must be the name of an entry in spec.resourceClaims"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs := seedObjects(t)
			for _, obj := range objs {
				tc.corrupt(obj)
			}
			expectErrs(t, validateSeed(objs), tc.want...)
		})
	}
}

func spec(o map[string]interface{}) map[string]interface{} {
	return o["spec"].(map[string]interface{})
}

// on<Kind> applies f to the object if it is of that kind.
func on[T runtime.Object](f func(T)) func(runtime.Object) {
	return func(obj runtime.Object) {
		if o, ok := obj.(T); ok {
			f(o)
		}
	}
}

var (
	onNamespace   = on[*corev1.Namespace]
	onNode        = on[*corev1.Node]
	onPod         = on[*corev1.Pod]
	onCRD         = on[*apiextv1.CustomResourceDefinition]
	onClass       = on[*resourcev1alpha2.ResourceClass]
	onClaim       = on[*resourcev1alpha2.ResourceClaim]
	onClaimParams = on[*resourcev1alpha2.ResourceClaimParameters]
)

func onSlice(f func(*parts)) func(runtime.Object) {
	return on(func(s *resourcev1alpha2.NodeResourceSlice) { f(s.Spec.Partitionable) })
}

func onCR(f func(map[string]interface{})) func(runtime.Object) {
	return on(func(u *unstructured.Unstructured) { f(u.Object) })
}
