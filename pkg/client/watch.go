package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	jsonv2 "github.com/go-json-experiment/json"
)

// watchDecoder decodes a watch stream of one kind. client-go's decoder
// reads each event as a metav1.WatchEvent whose object is raw JSON, then
// finds the object's kind in the raw JSON and decodes it: the object is
// scanned four times and decoded once. The kind of a typed client's watch
// is known, so this decoder reads the event's envelope and decodes the
// object straight into a new T. As client-go's does, it clears the
// objects' TypeMeta. Objects are decoded with encoding/json's v2 engine
// (github.com/go-json-experiment/json), about twice as fast as the v1
// engine for API objects and with half the allocations; its defaults
// match what a client needs of the server's output: names match case-
// sensitively, as Kubernetes' decoder does, unknown fields are ignored,
// and the API types' own UnmarshalJSON methods (times, quantities, raw
// extensions, unstructured objects) are used as they are.
type watchDecoder[T runtime.Object] struct {
	body   io.ReadCloser
	dec    *json.Decoder
	newObj func() T
}

func newWatchDecoder[T runtime.Object](body io.ReadCloser, newObj func() T) *watchDecoder[T] {
	return &watchDecoder[T]{body: body, dec: json.NewDecoder(body), newObj: newObj}
}

// watchEnvelope is one event as the API server writes it.
type watchEnvelope struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Decode implements watch.Decoder.
func (d *watchDecoder[T]) Decode() (watch.EventType, runtime.Object, error) {
	var ev watchEnvelope
	if err := d.dec.Decode(&ev); err != nil {
		return "", nil, err
	}
	var obj runtime.Object
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		obj = d.newObj()
	case watch.Error:
		obj = &metav1.Status{}
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", ev.Type)
	}
	if len(ev.Object) == 0 {
		return "", nil, fmt.Errorf("watch event %s has no object", ev.Type)
	}
	if err := jsonv2.Unmarshal(ev.Object, obj); err != nil {
		return "", nil, fmt.Errorf("decode %s watch event: %w", ev.Type, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return ev.Type, obj, nil
}

// Close implements watch.Decoder.
func (d *watchDecoder[T]) Close() { _ = d.body.Close() }

// watchReporter turns a decoding error into the ERROR event a watch ends
// with, as client-go's watches do.
var watchReporter = apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")
