package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
)

// podFields and statusFields are the field sets of a pod's create and of
// its node's status updates, as the API server records them.
const (
	podFields    = `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:claims":{".":{},"k:{\"name\":\"gpu\"}":{".":{},"f:name":{}}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:resourceClaims":{".":{},"k:{\"name\":\"gpu\"}":{".":{},"f:name":{},"f:resourceClaimTemplateName":{}}},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`
	statusFields = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}`
)

// managedPod is a pod as the API server sends it: with the managedFields
// of its create, its binding and its status updates.
func managedPod(i int) *corev1.Pod {
	t := metav1.Unix(1700000000, 0)
	entry := func(manager, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: sub}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: "0d9b5c7e-3c55-4a0e-9f63-6c1e1f0e8a11",
			ResourceVersion: fmt.Sprint(1000 + i), CreationTimestamp: t, Labels: map[string]string{"app": "bench"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				entry("bench", "", podFields),
				entry("allot-scheduler", "status", `{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"PodScheduled\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}}}}`),
				entry("allot-node", "status", statusFields),
			},
		},
		Spec: corev1.PodSpec{
			NodeName:       "node-7",
			Containers:     []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("gpu-template")}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.7", PodIP: "10.1.7.3"},
	}
}

func ptrTo[T any](v T) *T { return &v }

// podStream is a watch stream of n MODIFIED events of managed pods; with
// objectFirst the object comes before the event's type.
func podStream(t testing.TB, n int, objectFirst bool) []byte {
	var b bytes.Buffer
	for i := range n {
		obj, err := json.Marshal(managedPod(i))
		if err != nil {
			t.Fatalf("encode pod: %v", err)
		}
		if objectFirst {
			fmt.Fprintf(&b, `{"object":%s,"type":"MODIFIED"}`+"\n", obj)
		} else {
			fmt.Fprintf(&b, `{"type":"MODIFIED","object":%s}`+"\n", obj)
		}
	}
	return b.Bytes()
}

func podList(t testing.TB, n int) []byte {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "99"}}
	for i := range n {
		p := managedPod(i)
		p.TypeMeta = metav1.TypeMeta{}
		list.Items = append(list.Items, *p)
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatalf("encode list: %v", err)
	}
	return data
}

// TestDecodeWithoutManagedFields: with skipManagedFields the watch decoder
// (either order of type and object) and the list decoder leave
// managedFields nil and decode the rest of the object as without it.
func TestDecodeWithoutManagedFields(t *testing.T) {
	want := managedPod(0)
	want.TypeMeta = metav1.TypeMeta{}
	want.ManagedFields = nil
	check := func(what string, got *corev1.Pod) {
		t.Helper()
		if got.ManagedFields != nil {
			t.Fatalf("%s: managedFields = %v, want nil", what, got.ManagedFields)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Fatalf("%s: decoded\n%s\nwant\n%s", what, g, w)
		}
	}
	for _, objectFirst := range []bool{false, true} {
		d := newWatchDecoder(io.NopCloser(bytes.NewReader(podStream(t, 1, objectFirst))), func() *corev1.Pod { return &corev1.Pod{} }, skipManagedFields)
		typ, obj, err := d.Decode()
		if err != nil || typ != watch.Modified {
			t.Fatalf("watch event (object first: %v): %s, %v", objectFirst, typ, err)
		}
		check(fmt.Sprintf("watch event (object first: %v)", objectFirst), obj.(*corev1.Pod))
	}
	var list corev1.PodList
	if _, ok := decodeTyped(podList(t, 1), &list, skipManagedFields); !ok || len(list.Items) != 1 || list.ResourceVersion != "99" {
		t.Fatalf("list: ok %v, %d items, resourceVersion %q", ok, len(list.Items), list.ResourceVersion)
	}
	check("list item", &list.Items[0])

	d := newWatchDecoder(io.NopCloser(bytes.NewReader(podStream(t, 1, false))), func() *corev1.Pod { return &corev1.Pod{} })
	if _, obj, err := d.Decode(); err != nil || len(obj.(*corev1.Pod).ManagedFields) != 3 {
		t.Fatalf("without the option: %v, %v; want the 3 entries", obj, err)
	}
}

// TestStripManagedFields: the transform clears an object's managedFields
// and every list item's, and passes other values through.
func TestStripManagedFields(t *testing.T) {
	p := managedPod(0)
	if out, err := StripManagedFields(p); err != nil || out != any(p) || p.ManagedFields != nil {
		t.Fatalf("pod: %v, %v", p.ManagedFields, err)
	}
	list := &corev1.PodList{Items: []corev1.Pod{*managedPod(1), *managedPod(2)}}
	if _, err := StripManagedFields(list); err != nil || list.Items[0].ManagedFields != nil || list.Items[1].ManagedFields != nil {
		t.Fatalf("list: %v", err)
	}
	if out, err := StripManagedFields("x"); err != nil || out != "x" {
		t.Fatalf("string: %v, %v", out, err)
	}
}

// BenchmarkDecodeManagedPods decodes a watch stream of pods (per event)
// and a list of them (per pod), with their managedFields (all) and
// without (skip); watch/omitted is the skipping decoder's work when the
// server left the managedFields out of the events.
func BenchmarkDecodeManagedPods(b *testing.B) {
	const n = 100
	stream, list := podStream(b, n, false), podList(b, n)
	var omitted bytes.Buffer
	for i := range n {
		p := managedPod(i)
		p.ManagedFields = nil
		obj, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&omitted, `{"type":"MODIFIED","object":%s}`+"\n", obj)
	}
	b.Run("watch/omitted", func(b *testing.B) {
		b.SetBytes(int64(omitted.Len() / n))
		b.ReportAllocs()
		for i := 0; i < b.N; i += n {
			d := newWatchDecoder(io.NopCloser(bytes.NewReader(omitted.Bytes())), func() *corev1.Pod { return &corev1.Pod{} }, skipManagedFields)
			for range n {
				if _, _, err := d.Decode(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, mode := range []struct {
		name string
		opts []jsonv2.Options
	}{{"all", nil}, {"skip", []jsonv2.Options{skipManagedFields}}} {
		b.Run("watch/"+mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream) / n))
			b.ReportAllocs()
			for i := 0; i < b.N; i += n {
				d := newWatchDecoder(io.NopCloser(bytes.NewReader(stream)), func() *corev1.Pod { return &corev1.Pod{} }, mode.opts...)
				for range n {
					if _, _, err := d.Decode(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("list/"+mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(list) / n))
			b.ReportAllocs()
			for i := 0; i < b.N; i += n {
				var out corev1.PodList
				if _, ok := decodeTyped(list, &out, mode.opts...); !ok {
					b.Fatal("list not decoded")
				}
			}
		})
	}
}
