package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/storage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWriteWithRVIsWithRV: watch events and list items written in place
// (writeWithRV) are byte for byte what withRV builds, and withRV puts the
// resourceVersion first inside the top-level metadata.
func TestWriteWithRVIsWithRV(t *testing.T) {
	for name, tc := range map[string]struct {
		stored string
		rev    int64
		want   string
	}{
		"fields":         {`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{}}`, 42, `{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"42","name":"a"},"spec":{}}`},
		"empty metadata": {`{"kind":"X","metadata":{}}`, 7, `{"kind":"X","metadata":{"resourceVersion":"7"}}`},
		"no metadata":    {`{"kind":"X","spec":{}}`, 7, `{"kind":"X","spec":{}}`},
		"first only":     {`{"metadata":{"name":"a"},"spec":{"metadata":{"x":1}}}`, 1, `{"metadata":{"resourceVersion":"1","name":"a"},"spec":{"metadata":{"x":1}}}`},
		"largest rev":    {`{"metadata":{}}`, math.MaxInt64, `{"metadata":{"resourceVersion":"9223372036854775807"}}`},
		"negative rev":   {`{"metadata":{}}`, math.MinInt64, `{"metadata":{"resourceVersion":"-9223372036854775808"}}`},
		"cut short":      {`{"metadata":{`, 3, `{"metadata":{"resourceVersion":"3"`},
		"empty":          {``, 3, ``},
	} {
		t.Run(name, func(t *testing.T) {
			got := string(withRV([]byte(tc.stored), tc.rev))
			if got != tc.want {
				t.Errorf("withRV = %s, want %s", got, tc.want)
			}
			var buf bytes.Buffer
			buf.WriteString("[")
			writeWithRV(&buf, []byte(tc.stored), tc.rev)
			if w := buf.String(); w != "["+got {
				t.Errorf("writeWithRV wrote %s, want [%s", w, got)
			}
		})
	}
}

// discardResponse is an http.ResponseWriter that drops what is written.
type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}

// BenchmarkWatchEventEncode is one watch event of a stored pod (a bound
// pod with three managedFields entries, ~4 KB) written into a watch
// response's buffer, as the API server does for every watcher of every
// write, whole and with managedFields left out; and one list of 100 such
// pods.
func BenchmarkWatchEventEncode(b *testing.B) {
	var pods *kind
	for _, k := range builtinKinds() {
		if k.gvk.Group == "" && k.resource == "pods" {
			pods = k
		}
	}
	if pods == nil {
		b.Fatal("no pods kind")
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "pod-1234", Namespace: "test", UID: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{NodeName: "node-042", SchedulerName: "default-scheduler",
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	fields := []byte(`{"f:x0":{}`)
	for i := 1; i < 100; i++ {
		fields = fmt.Appendf(fields, `,"f:x%d":{}`, i)
	}
	fields = append(fields, '}')
	for _, m := range []string{"bench", "scheduler", "node"} {
		pod.ManagedFields = append(pod.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}})
	}
	stored, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	recorded, err := testAPI.decoderFor(pods)("k", stored)
	if err != nil || recorded.Omit == (storage.Span{}) {
		b.Fatalf("no managedFields recorded: %v", err)
	}
	for _, bc := range []struct {
		name string
		omit bool
		span storage.Span
	}{
		{"watch", false, storage.Span{}},
		// managedFields cut out as written (omit.go), where the watch
		// cache recorded them, or found by a scan.
		{"watch-omitManagedFields", true, recorded.Omit},
		{"watch-omitManagedFields-scan", true, storage.Span{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ww := &watchWriter{k: pods, w: &discardResponse{h: http.Header{}}, omitMF: bc.omit}
			b.ReportAllocs()
			b.SetBytes(int64(len(stored)))
			rev := int64(1)
			for b.Loop() {
				if !ww.send("MODIFIED", listed{value: stored, rev: rev, omit: bc.span}) {
					b.Fatal("send failed")
				}
				rev++
			}
		})
	}
	b.Run("list100", func(b *testing.B) {
		items := make([]listed, 100)
		for i := range items {
			items[i] = listed{value: stored, rev: int64(i + 1)}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeList(pods, items, 200, "", false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
