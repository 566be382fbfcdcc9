package scheme

import (
	"bytes"
	"strings"
	"testing"

	"allot.dev/allot/examples/manifests"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSeedExampleDecodesStrictly(t *testing.T) {
	docs, err := SplitYAML(bytes.NewReader(manifests.Seed002))
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	kinds := map[string]int{}
	for i, d := range docs {
		obj, gvk, err := Decode(d)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		kinds[gvk.Kind]++
		if s, ok := obj.(*resourcev1alpha2.NodeResourceSlice); ok {
			if got := len(s.Spec.Partitionable.ResourceInstances); got != 2 {
				t.Errorf("slice instances = %d, want 2", got)
			}
		}
		if _, ok := obj.(*unstructured.Unstructured); ok && gvk.Kind != "CardParameters" {
			t.Errorf("built-in kind %s decoded as unstructured", gvk.Kind)
		}
	}
	for _, k := range []string{"Namespace", "Node", "NodeResourceSlice", "CustomResourceDefinition", "CardParameters", "ResourceClaimParameters", "ResourceClass", "ResourceClaim", "Pod"} {
		if kinds[k] != 1 {
			t.Errorf("kind %s seen %d times, want 1", k, kinds[k])
		}
	}
}

func TestDecodeRejectsUnknownFieldWithPath(t *testing.T) {
	doc := []byte(`apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: busybox
    imagePolicy: Always
`)
	_, _, err := Decode(doc)
	if err == nil || !strings.Contains(err.Error(), `spec.containers[0].imagePolicy`) {
		t.Fatalf("err = %v, want unknown field with its path", err)
	}
}

func TestDecodeRejectsDuplicateField(t *testing.T) {
	_, _, err := Decode([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","name":"b"}}`))
	if err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("err = %v, want duplicate field error", err)
	}
}

func TestSplitExpandsLists(t *testing.T) {
	docs, err := SplitYAML(strings.NewReader(`# comment only
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: a}}
- {apiVersion: v1, kind: Namespace, metadata: {name: b}}
---
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("docs = %d, want 2", len(docs))
	}
	obj, _, err := Decode(docs[1])
	if err != nil {
		t.Fatal(err)
	}
	if ns := obj.(*corev1.Namespace); ns.Name != "b" {
		t.Fatalf("name = %q", ns.Name)
	}
}
