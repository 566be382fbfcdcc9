package validation

import (
	"testing"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"allot.dev/allot/api/scheme"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FuzzDecodeValidate decodes any document strictly and runs it through
// Default and every validation that applies. Whatever the input, nothing
// may panic. The corpus is the seed example, handcrafted documents of each
// kind (fuzzDocs) and regression inputs in testdata/fuzz.
func FuzzDecodeValidate(f *testing.F) {
	for _, doc := range seedDocs(f) {
		f.Add(doc)
	}
	for _, doc := range fuzzDocs {
		f.Add([]byte(doc))
	}
	var schema *apiextv1.JSONSchemaProps
	for _, obj := range seedObjects(f) {
		if crd, ok := obj.(*apiextv1.CustomResourceDefinition); ok {
			schema = CustomResourceSchema(crd, "v1alpha1")
		}
	}
	SetSelectorCompiler(fakeCompiler)
	f.Cleanup(func() { SetSelectorCompiler(nil) })
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := scheme.Decode(data)
		if err != nil {
			return
		}
		exercise(obj, schema)
	})
}

// sampleCR is checked against every schema of a fuzzed CRD.
const sampleCR = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},
"spec":{"count":2,"ratio":0.5,"name":"abc","tags":["a","b"],"nested":{"x":null},"sharing":{"strategy":"TimeSliced"}}}`

func exercise(obj runtime.Object, schema *apiextv1.JSONSchemaProps) {
	Default(obj)
	old := obj.DeepCopyObject()
	render(Validate(obj))
	render(ValidateUpdate(obj, old))
	render(ValidateStatusUpdate(obj, old))
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		oldObj := o.DeepCopy().Object
		DefaultCustomResource(schema, o.Object)
		render(ValidateCustomResource(schema, o.Object))
		render(ValidateCustomResourceUpdate(schema, o.Object, oldObj))
	case *apiextv1.CustomResourceDefinition:
		for _, v := range o.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			cr, _, err := scheme.Decode([]byte(sampleCR))
			if err != nil {
				panic(err)
			}
			u := cr.(*unstructured.Unstructured)
			DefaultCustomResource(v.Schema.OpenAPIV3Schema, u.Object)
			render(ValidateCustomResource(v.Schema.OpenAPIV3Schema, u.Object))
		}
	}
}

// render formats every error, as the API server will.
func render(errs field.ErrorList) {
	for _, e := range errs {
		_ = e.Error()
	}
	_ = errs.ToAggregate()
}

// fuzzDocs are handcrafted documents of every kind, valid and invalid,
// that reach the corners of validation.
var fuzzDocs = []string{
	`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns","labels":{"a":"b"}},"spec":{"finalizers":["kubernetes"]}}`,
	`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","ownerReferences":[{"apiVersion":"v1","kind":"X","name":"y","uid":"z","controller":true}]},
"spec":{"taints":[{"key":"gpu","effect":"NoSchedule"},{"key":"gpu","effect":"NoSchedule"}]},
"status":{"capacity":{"cpu":"-1","example.com/gpu":"2"},"conditions":[{"type":"Ready","status":"Maybe"}],"addresses":[{"type":"","address":""}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","generateName":"p-"},
"spec":{"initContainers":[{"name":"init","image":"i"}],"containers":[{"name":"app","image":"busybox","env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
"ports":[{"containerPort":80,"protocol":"TCP","name":"http"}],
"resources":{"limits":{"cpu":"1","example.com/gpu":"1"},"requests":{"example.com/gpu":"500m","memory":"1Gi"},"claims":[{"name":"gpu"},{"name":"nope"}]}}],
"resourceClaims":[{"name":"gpu","resourceClaimName":"c","resourceClaimTemplateName":"t"},{"name":"gen","resourceClaimTemplateName":"t"}],
"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Gt","values":["x"]}],
"matchFields":[{"key":"metadata.name","operator":"In","values":["n"]}]}]},"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":200,"preference":{}}]}},
"tolerations":[{"operator":"Exists","tolerationSeconds":5}],"activeDeadlineSeconds":-1,"terminationGracePeriodSeconds":-5},
"status":{"phase":"Succeeded","conditions":[{"type":"","status":""}],"resourceClaimStatuses":[{"name":"gen","resourceClaimName":"x"},{"name":"gpu"}]}}`,
	`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"default"},"involvedObject":{"kind":"Pod","name":"p"},"type":"Warning","reason":"Failed","count":-1,"reportingComponent":"","reportingInstance":""}`,
	`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"count/resourceclaims.resource.k8s.io":"4","gpu.resourceclass.resource.k8s.io/resourceclaims":"1","bogus":"1"}},"status":{"used":{"pods":"-1"}}}`,
	`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","namespace":"default"},"target":{"kind":"Node","name":"n"},
"resourceClaims":[{"name":"c","driverName":"d.example.com","allocation":{"resourceHandles":[{"data":"x","structuredData":{"partitionable":{"instances":[{"id":""},{"id":"a"},{"id":"a"}]}}}],"availableOnNodes":{"nodeSelectorTerms":[]}}},
{"name":"c","allocation":[1,2]},{"name":"d","allocation":"x"}],"allocationFences":[{"nodeName":"n","driverName":"d","revision":"1"},{"nodeName":"n","driverName":"d","revision":""}]}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClass","metadata":{"name":"gpu"},"driverName":"d.example.com","controllerName":"ctl.example.com",
"parametersRef":{"kind":"K","name":"n","namespace":"ns"},"suitableNodes":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"In"},{"key":"b","operator":"Exists","values":["x"]},{"key":"c","operator":"Lt","values":["1"]}]}]}}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default","deletionTimestamp":"2024-01-01T00:00:00Z"},
"spec":{"resourceClassName":"gpu","allocationMode":"Immediate","parametersRef":{"kind":"K","name":"p"}},
"status":{"driverName":"d.example.com","allocation":{"shareable":false,"resourceHandles":[{"driverName":"d.example.com","data":"opaque"}]},
"reservedFor":[{"resource":"pods","name":"a","uid":"1"},{"resource":"pods","name":"b","uid":"1"}],"deallocationRequested":true}}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClaimTemplate","metadata":{"name":"t","namespace":"default"},"spec":{"metadata":{"labels":{"a":"b"}},"spec":{"resourceClassName":"gpu"}}}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"PodSchedulingContext","metadata":{"name":"p","namespace":"default"},"spec":{"selectedNode":"n1","potentialNodes":["n1","n2","n1"]},
"status":{"resourceClaims":[{"name":"gpu","unsuitableNodes":["n2"]},{"name":"gpu"}]}}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"NodeResourceSlice","metadata":{"name":"s"},"spec":{"nodeName":"n","driverName":"d.example.com","partitionable":{
"commonAttributes":[{"name":"g","attributes":[{"name":"v","version":"v1.2"},{"name":"q","quantity":"1Gi","int":3},{"name":"x"}]}],
"resourceInstances":[{"name":"a","commonAttributesRefs":["g","missing"],"health":"Healthy","attributes":[{"name":"is","intSlice":[1,2]},{"name":"ss","stringSlice":["a"]},{"name":"b","bool":true}],
"partitions":[{"name":"p","commonAttributesRefs":["g"],"resourceInstances":[{"name":"b","partitions":[{"name":"q","resourceInstances":[{"name":"c"}]}]}]}]}]}}}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClaimParameters","metadata":{"name":"p","namespace":"default"},"generatedFrom":{"kind":"K","name":"n"},"shareable":true,
"requests":[{"driverName":"d.example.com","partitionable":{"required":[{"name":"a","selector":"x !! y"},{"selector":"panic"},{"selector":""}]}},{"driverName":"d.example.com"}]}`,
	`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClassParameters","metadata":{"name":"p"},"generatedFrom":{"kind":"K","name":"n"},
"filters":[{"driverName":"d.example.com","partitionable":{"selector":"true"}},{"driverName":""}]}`,
	`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
"names":{"plural":"widgets","kind":"Widget"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","default":{},"required":["count"],"minProperties":1,"maxProperties":10,"properties":{
"count":{"type":"integer","minimum":1,"maximum":5,"exclusiveMaximum":true,"default":2,"enum":[1,2,3]},
"ratio":{"type":"number","anyOf":[{"minimum":0.1},{"maximum":-1}],"not":{"minimum":0.9}},
"name":{"type":"string","pattern":"^[a-z]+$","minLength":1,"maxLength":5,"oneOf":[{"pattern":"^a"},{"pattern":"c$"}]},
"tags":{"type":"array","uniqueItems":true,"minItems":1,"maxItems":3,"items":{"type":"string","enum":["a","b",null]}},
"nested":{"type":"object","additionalProperties":{"type":"integer","nullable":true,"default":7}},
"sharing":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"allOf":[{"required":["strategy"]}]},
"port":{"x-kubernetes-int-or-string":true,"default":"http"}}}}}}}]}}`,
	`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"bad.example"},"spec":{"group":"example","scope":"Global","preserveUnknownFields":true,
"names":{"plural":"Bad","kind":"bad","listKind":"bad"},"versions":[{"name":"v1","served":true,"storage":false},{"name":"v1","served":false,"storage":false,"schema":{"openAPIV3Schema":{
"type":"array","properties":{"a":{"type":"weird","pattern":"(","minLength":5,"maxLength":1,"default":{"x":1},"items":{}}},"additionalProperties":true}}}]}}`,
	`{"apiVersion":"dra.example.com/v1alpha1","kind":"CardParameters","metadata":{"name":"p","namespace":"default"},"spec":{"count":1.5,"unknown":true,"sharing":null}}`,
}
