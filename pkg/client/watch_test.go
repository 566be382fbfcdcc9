package client

import (
	"io"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
)

// TestWatchDecoder: each event type decodes to the kind it carries (the
// client's for objects and bookmarks, Status for errors) with TypeMeta
// cleared; a bad type or a cut stream is an error, the end of the stream
// io.EOF.
func TestWatchDecoder(t *testing.T) {
	stream := `{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"5"},"spec":{"containers":[{"name":"c","image":"x","resources":{"requests":{"cpu":"100m"}}}]}}}
{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old"}}
{"type":"NONSENSE","object":{}}
`
	d := newWatchDecoder(io.NopCloser(strings.NewReader(stream)), func() *corev1.Pod { return &corev1.Pod{} })
	typ, obj, err := d.Decode()
	pod, ok := obj.(*corev1.Pod)
	var cpu int64
	if ok && len(pod.Spec.Containers) == 1 {
		q := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		cpu = q.MilliValue()
	}
	if err != nil || typ != watch.Added || !ok || pod.Name != "a" || pod.ResourceVersion != "5" || cpu != 100 || pod.Kind != "" {
		t.Fatalf("ADDED: %s %#v %v", typ, obj, err)
	}
	typ, obj, err = d.Decode()
	if pod, ok := obj.(*corev1.Pod); err != nil || typ != watch.Bookmark || !ok || pod.ResourceVersion != "9" {
		t.Fatalf("BOOKMARK: %s %#v %v", typ, obj, err)
	}
	typ, obj, err = d.Decode()
	if st, ok := obj.(*metav1.Status); err != nil || typ != watch.Error || !ok || st.Code != 410 || !apierrors.IsResourceExpired(apierrors.FromObject(st)) {
		t.Fatalf("ERROR: %s %#v %v", typ, obj, err)
	}
	if _, _, err := d.Decode(); err == nil || !strings.Contains(err.Error(), "invalid watch event type") {
		t.Fatalf("unknown type: %v", err)
	}

	d = newWatchDecoder(io.NopCloser(strings.NewReader(`{"type":"ADDED","object":{"metadata":{"name":"a"}}}`)), func() *corev1.Pod { return &corev1.Pod{} })
	if _, _, err := d.Decode(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Decode(); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
	// The object before the type, an unknown field, an event without object.
	d = newWatchDecoder(io.NopCloser(strings.NewReader(`{"object":{"metadata":{"name":"b"}},"extra":[1,{"x":2}],"type":"DELETED"} {"type":"ADDED"}`)),
		func() *corev1.Pod { return &corev1.Pod{} })
	if typ, obj, err := d.Decode(); err != nil || typ != watch.Deleted || obj.(*corev1.Pod).Name != "b" {
		t.Fatalf("object first: %s %#v %v", typ, obj, err)
	}
	if _, _, err := d.Decode(); err == nil || !strings.Contains(err.Error(), "has no object") {
		t.Fatalf("no object: %v", err)
	}
	d = newWatchDecoder(io.NopCloser(strings.NewReader(`{"type":"ADDED","object":{"metadata":`)), func() *corev1.Pod { return &corev1.Pod{} })
	if _, _, err := d.Decode(); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut stream: %v, want io.ErrUnexpectedEOF", err)
	}
	// A connection lost between events or inside one (the API server
	// stopped): exactly io.ErrUnexpectedEOF, which client-go's
	// StreamWatcher takes for the quiet end of the watch; any other error
	// becomes an ERROR event that sends the reflector into its back-off.
	for _, body := range []string{"", `{"type":"ADDED","object":{"metadata":`, `{"type":"ADDED",`} {
		r := io.MultiReader(strings.NewReader(body), errReader{io.ErrUnexpectedEOF})
		d = newWatchDecoder(io.NopCloser(r), func() *corev1.Pod { return &corev1.Pod{} })
		if _, _, err := d.Decode(); err != io.ErrUnexpectedEOF {
			t.Errorf("connection lost after %q: %v, want io.ErrUnexpectedEOF", body, err)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
