package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// encodeForStorage writes obj as JSON without its resourceVersion, with
// apiVersion, kind and metadata first so that the version can later be
// spliced in without decoding (see withRV).
func encodeForStorage(k *kind, obj runtime.Object) ([]byte, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("access metadata: %w", err)
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	defer acc.SetResourceVersion(rv)
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return encodeUnstructured(u.Object)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", k.gvk.Kind, err)
	}
	return data, nil
}

// encodeUnstructured writes apiVersion, kind and metadata first, then the
// other top-level keys in sorted order.
func encodeUnstructured(m map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	write := func(key string, v any) error {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(key)
		buf.Write(kb)
		buf.WriteByte(':')
		vb, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode field %q: %w", key, err)
		}
		buf.Write(vb)
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	keys = append([]string{"apiVersion", "kind", "metadata"}, keys...)
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if err := write(k, v); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

var metadataKey = []byte(`"metadata":{`)

// withRV returns stored JSON with metadata.resourceVersion set to rev. The
// stored form has no resourceVersion and its top-level "metadata" is the
// first object-valued "metadata" key (apiVersion and kind come before it
// and cannot contain that text).
func withRV(stored []byte, rev int64) []byte {
	at := rvAt(stored)
	if at < 0 {
		return stored
	}
	var num [20]byte
	rv := strconv.AppendInt(num[:0], rev, 10)
	out := make([]byte, 0, len(stored)+len(rvPrefix)+len(rv)+2)
	out = append(out, stored[:at]...)
	out = append(out, rvPrefix...)
	out = append(out, rv...)
	out = append(out, '"')
	if at < len(stored) && stored[at] != '}' {
		out = append(out, ',')
	}
	return append(out, stored[at:]...)
}

// writeWithRV writes withRV(stored, rev) to buf without building it
// apart: watch events and list items go straight into their response's
// buffer.
func writeWithRV(buf *bytes.Buffer, stored []byte, rev int64) {
	at := rvAt(stored)
	if at < 0 {
		buf.Write(stored)
		return
	}
	var num [20]byte
	buf.Write(stored[:at])
	buf.WriteString(rvPrefix)
	buf.Write(strconv.AppendInt(num[:0], rev, 10))
	buf.WriteByte('"')
	if at < len(stored) && stored[at] != '}' {
		buf.WriteByte(',')
	}
	buf.Write(stored[at:])
}

const rvPrefix = `"resourceVersion":"`

// rvAt is where withRV inserts the resourceVersion in stored: just inside
// the top-level metadata object, or -1 when stored has none.
func rvAt(stored []byte) int {
	i := bytes.Index(stored, metadataKey)
	if i < 0 {
		return -1
	}
	return i + len(metadataKey)
}

// decodeStored decodes stored JSON into a fresh object of the kind with its
// resourceVersion set. Typed objects are decoded with encoding/json's v2
// engine (github.com/go-json-experiment/json), twice as fast as v1 on API
// objects: what is stored is this server's own canonical output.
func decodeStored(k *kind, stored []byte, rev int64) (runtime.Object, error) {
	return decodeStoredWith(k, stored, rev, storedJSON)
}

// decodeStoredWith is decodeStored with the typed decode's options
// (storedJSON, or the watch cache's, mfSpan's).
func decodeStoredWith(k *kind, stored []byte, rev int64, opts jsonv2.Options) (runtime.Object, error) {
	if k.sibling != nil {
		obj, sk, err := decodeNativeWith(k, stored, rev, opts)
		if err != nil || sk == k {
			return obj, err
		}
		return viewOf(k, obj)
	}
	obj := k.newObj()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Integers as int64, as unstructured's accessors (generation)
		// and the field manager's schemas expect them.
		if err := utiljson.Unmarshal(stored, &u.Object); err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", k.gvk.Kind, err)
		}
	} else if err := jsonv2.Unmarshal(stored, obj, opts); err != nil {
		return nil, fmt.Errorf("decode stored %s: %w", k.gvk.Kind, err)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("access metadata: %w", err)
	}
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	return obj, nil
}

// storedJSON are the options of a typed decode of a stored value:
// metav1.Time read as metav1.Time.UnmarshalJSON reads it, without its
// second decode of the string through encoding/json v1 (every object has a
// creationTimestamp, every managedFields entry a time).
var storedJSON = jsonv2.WithUnmarshalers(unmarshalTime)

// unmarshalTime is metav1.Time.UnmarshalJSON for encoding/json v2: null is
// the zero time, a string is parsed as RFC 3339 and kept in local time;
// anything else is an error.
var unmarshalTime = jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *metav1.Time) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case 'n':
		t.Time = time.Time{}
		return nil
	case '"':
		pt, err := time.Parse(time.RFC3339, tok.String())
		if err != nil {
			return err
		}
		t.Time = pt.Local()
		return nil
	}
	return fmt.Errorf("a time must be a JSON string or null, not %s", tok.Kind())
})

// parseRV parses a resourceVersion; "" is 0.
func parseRV(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid resourceVersion %q", s)
	}
	return v, nil
}
