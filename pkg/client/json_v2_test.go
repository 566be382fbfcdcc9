package client

import (
	"bytes"
	stdjson "encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	kjson "sigs.k8s.io/json"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
)

// TestWatchDecoderMatchesKubernetesDecoder: the watch decoder's engine
// (encoding/json v2) decodes what the API server writes into the same
// objects as Kubernetes' decoder (sigs.k8s.io/json, case-sensitive), for
// every manifest in examples/ and for objects that use every kind of
// field the API types have: times, quantities, raw extensions, maps,
// pointers, escapes, empty values.
func TestWatchDecoderMatchesKubernetesDecoder(t *testing.T) {
	for i, obj := range sampleObjects(t) {
		data, err := stdjson.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		want := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, want); err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
		stream := `{"type":"MODIFIED","object":` + string(data) + "}\n"
		d := newWatchDecoder(io.NopCloser(strings.NewReader(stream)), func() runtime.Object {
			return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
		})
		_, got, err := d.Decode()
		if err != nil {
			t.Fatalf("object %d (%T): %v", i, obj, err)
		}
		want.GetObjectKind().SetGroupVersionKind(got.GetObjectKind().GroupVersionKind())
		sameObject(t, i, want, got)
	}
}

// TestTypedSerializerMatchesKubernetesDecoder: responses decoded into a
// typed object of their own kind take the v2 engine and give what the
// serializer gives; every other case is the serializer's own answer.
func TestTypedSerializerMatchesKubernetesDecoder(t *testing.T) {
	base := json.NewSerializerWithOptions(topLevelMeta{}, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	fast := typedSerializer{base}
	for i, obj := range sampleObjects(t) {
		if _, ok := obj.(runtime.Unstructured); ok {
			continue
		}
		data, err := stdjson.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		newObj := func() runtime.Object { return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object) }
		want, wantGVK, err := base.Decode(data, nil, newObj())
		if err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
		got, gotGVK, err := fast.Decode(data, nil, newObj())
		if err != nil || *gotGVK != *wantGVK {
			t.Fatalf("object %d (%T): %v, kind %v want %v", i, obj, err, gotGVK, wantGVK)
		}
		sameObject(t, i, want, got)
	}
	// The fast path is taken: it allocates less.
	podJSON, _ := stdjson.Marshal(richObjects()[0])
	slow := testing.AllocsPerRun(20, func() { _, _, _ = base.Decode(podJSON, nil, &corev1.Pod{}) })
	quick := testing.AllocsPerRun(20, func() { _, _, _ = fast.Decode(podJSON, nil, &corev1.Pod{}) })
	if quick >= slow {
		t.Errorf("decoding a pod: %.0f allocations, the serializer %.0f: the v2 path was not taken", quick, slow)
	}
	// A Status where a pod was expected, and no target: the serializer's
	// answers.
	status := []byte(`{"kind":"Status","apiVersion":"v1","status":"Success","code":200}`)
	if got, _, err := fast.Decode(status, nil, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	} else if st, ok := got.(*metav1.Status); !ok || st.Code != 200 {
		t.Fatalf("Status into a pod: %T %+v", got, got)
	}
	pod := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"}}`)
	if got, _, err := fast.Decode(pod, nil, nil); err != nil || got.(*corev1.Pod).Name != "x" {
		t.Fatalf("no target: %#v %v", got, err)
	}
	if _, _, err := fast.Decode([]byte(`{"metadata":{"name":"x"}}`), nil, &corev1.Pod{}); err != nil {
		t.Fatalf("no kind in the document: %v", err)
	}
}

func sameObject(t *testing.T, i int, want, got runtime.Object) {
	t.Helper()
	a, _ := stdjson.Marshal(want)
	b, _ := stdjson.Marshal(got)
	if !bytes.Equal(a, b) || !reflect.DeepEqual(normalize(t, want), normalize(t, got)) {
		t.Fatalf("object %d (%T) decodes differently:\nkubernetes: %s\nv2:         %s", i, want, a, b)
	}
}

// sampleObjects are every API object of the manifests in examples/ and
// objects that use every kind of field the API types have.
func sampleObjects(t *testing.T) []runtime.Object {
	var objs []runtime.Object
	files, _ := filepath.Glob("../../examples/*/*.yaml")
	more, _ := filepath.Glob("../../examples/*/*/*.yaml")
	more2, _ := filepath.Glob("../../examples/*/*/*/*.yaml")
	files = append(append(files, more...), more2...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 || !bytes.Contains(doc, []byte("kind:")) {
				continue
			}
			obj, _, err := scheme.Decode(doc)
			if err != nil {
				continue // not an API object (driver configuration)
			}
			objs = append(objs, obj)
		}
	}
	if len(objs) < 10 {
		t.Fatalf("only %d example objects found", len(objs))
	}
	return append(objs, richObjects()...)
}

// normalize drops what a re-marshal compares already (quantities cache
// their string form) by going through JSON into a generic map.
func normalize(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	data, err := stdjson.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := stdjson.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func richObjects() []runtime.Object {
	name, grace := "tmpl", int64(0)
	now := metav1.Now()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": ""}, Finalizers: []string{"f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "o", UID: "ou"}}},
		Spec: corev1.PodSpec{NodeName: "n", TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "i", Command: []string{"sh", "-c", "ünïcode \"quoted\""},
				Env: []corev1.EnvVar{{Name: "E", Value: "v"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{"example.com/gpu": resource.MustParse("2")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &name}},
			Tolerations:    []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}},
	}
	claim := &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{Kind: "ResourceClaim", APIVersion: "resource.k8s.io/v1alpha2"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Finalizers: []string{resourceapi.DeleteProtectionFinalizer}},
		Spec:       resourceapi.ResourceClaimSpec{ResourceClassName: "gpu", AllocationMode: resourceapi.AllocationModeWaitForFirstConsumer},
		Status: resourceapi.ResourceClaimStatus{DriverName: "gpu.example.com",
			Allocation: &resourceapi.AllocationResult{Shareable: true,
				AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}}}},
				ResourceHandles: []resourceapi.ResourceHandle{{DriverName: "gpu.example.com", Data: "opaque", StructuredData: &resourceapi.StructuredResourceHandle{
					NodeName:              "n",
					VendorClassParameters: &runtime.RawExtension{Raw: []byte(`{"kind":"X","n":1.5,"big":12345678901234567}`)},
					Partitionable:         &resourceapi.PartitionableAllocationResult{Instances: []resourceapi.AllocatedResourceInstance{{ID: "gpu-0"}}}}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}},
	}
	empty := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}}
	return []runtime.Object{pod, claim, empty}
}
