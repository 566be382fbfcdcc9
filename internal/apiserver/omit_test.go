package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/storage"
)

// TestWriteWithRVOmit: the member is cut with one comma wherever it sits
// in metadata; the text "managedFields" elsewhere (a label's key, an
// annotation's value, a nested metadata) stays; anything the scan does
// not take is written as writeWithRV writes it.
func TestWriteWithRVOmit(t *testing.T) {
	const mf = `"managedFields":[{"manager":"m","fieldsV1":{"f:a":{},"k:{\"name\":\"c]}\\\\\"\"}":{}}}]`
	for name, tc := range map[string]struct{ stored, want string }{
		"last":   {`{"kind":"X","metadata":{"name":"a",` + mf + `},"spec":{}}`, `{"kind":"X","metadata":{"resourceVersion":"5","name":"a"},"spec":{}}`},
		"first":  {`{"kind":"X","metadata":{` + mf + `,"name":"a"},"spec":{}}`, `{"kind":"X","metadata":{"resourceVersion":"5","name":"a"},"spec":{}}`},
		"middle": {`{"metadata":{"name":"a",` + mf + `,"uid":"u"}}`, `{"metadata":{"resourceVersion":"5","name":"a","uid":"u"}}`},
		"only":   {`{"metadata":{` + mf + `},"spec":{}}`, `{"metadata":{"resourceVersion":"5"},"spec":{}}`},
		"null":   {`{"metadata":{"name":"a","managedFields":null}}`, `{"metadata":{"resourceVersion":"5","name":"a"}}`},
		"spaces": {`{"metadata":{ "name" : "a" , "managedFields" : [ 1 , 2 ] } }`, `{"metadata":{"resourceVersion":"5", "name" : "a"  } }`},
		"a label and an annotation named so": {
			`{"metadata":{"name":"a","labels":{"managedFields":"x"},"annotations":{"n":"\"managedFields\":[1]"},` + mf + `},"spec":{"metadata":{"managedFields":[]}}}`,
			`{"metadata":{"resourceVersion":"5","name":"a","labels":{"managedFields":"x"},"annotations":{"n":"\"managedFields\":[1]"}},"spec":{"metadata":{"managedFields":[]}}}`},
		"none":             {`{"metadata":{"name":"a"},"spec":{"managedFields":[]}}`, `{"metadata":{"resourceVersion":"5","name":"a"},"spec":{"managedFields":[]}}`},
		"empty metadata":   {`{"metadata":{}}`, `{"metadata":{"resourceVersion":"5"}}`},
		"no metadata":      {`{"kind":"X"}`, `{"kind":"X"}`},
		"cut short":        {`{"metadata":{"name":"a",` + mf[:40], `{"metadata":{"resourceVersion":"5","name":"a",` + mf[:40]},
		"unclosed string":  {`{"metadata":{"name":"a,"managedFields":[]}}`, `{"metadata":{"resourceVersion":"5","name":"a,"managedFields":[]}}`},
		"no colon":         {`{"metadata":{"managedFields"[]}}`, `{"metadata":{"resourceVersion":"5","managedFields"[]}}`},
		"value runs out":   {`{"metadata":{"managedFields":[`, `{"metadata":{"resourceVersion":"5","managedFields":[`},
		"member not ended": {`{"metadata":{"managedFields":[] "x":1}}`, `{"metadata":{"resourceVersion":"5","managedFields":[] "x":1}}`},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			writeWithRVOmit(&buf, []byte(tc.stored), 5, storage.Span{})
			if got := buf.String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestWriteWithRVOmitIsTheObjectWithout: for the stored fixtures of every
// hot kind, leaving managedFields out writes exactly the object encoded
// without them, by the span the watch cache records and by the scan
// (which agree).
func TestWriteWithRVOmitIsTheObjectWithout(t *testing.T) {
	for _, c := range cacheDecodeCases(t) {
		d, err := testAPI.decoderFor(c.k)("k", c.stored)
		if err != nil {
			t.Fatal(err)
		}
		from, to, ok := managedFieldsSpan(c.stored)
		if !ok || d.Omit != (storage.Span{From: int32(from), To: int32(to)}) {
			t.Errorf("%s: the cache recorded %v, the scan found %d, %d, %v", c.name, d.Omit, from, to, ok)
		}
		obj, err := decodeStored(c.k, c.stored, 9)
		if err != nil {
			t.Fatal(err)
		}
		mustAccessor(t, obj).SetManagedFields(nil)
		without, err := encodeForStorage(c.k, obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range []storage.Span{d.Omit, {}} {
			var buf bytes.Buffer
			writeWithRVOmit(&buf, c.stored, 9, span)
			if want := withRV(without, 9); !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s, span %v:\ngot  %s\nwant %s", c.name, span, buf.Bytes(), want)
			}
		}
	}
}

// TestOmitManagedFieldsParam: a list or watch asking for it gets the
// objects without managedFields, and otherwise what it got before; a
// write carrying the parameter stores managedFields as any write does.
func TestOmitManagedFieldsParam(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	omitted := startWatch(t, base+"?watch=true&"+OmitManagedFieldsParam+"=true")
	full := startWatch(t, base+"?watch=true")
	var created corev1.Pod
	admin(t, "POST", base+"?"+OmitManagedFieldsParam+"=true", makePod("o1").label("managedFields", "x").obj()).into(t, &created)
	if len(created.ManagedFields) == 0 {
		t.Fatalf("a create with the parameter stored no managedFields: %+v", created.ObjectMeta)
	}
	stored := admin(t, "GET", base+"/o1", nil)
	expect(t, stored, 200, `"managedFields"`)
	// isWithout: got is want without metadata.managedFields, the rest of
	// the bytes in place.
	isWithout := func(got, want []byte) bool {
		var g, w map[string]any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
			return false
		}
		delete(w["metadata"].(map[string]any), "managedFields")
		i := bytes.Index(want, []byte(`,"managedFields":`))
		return reflect.DeepEqual(g, w) && i > 0 && bytes.HasPrefix(got, want[:i]) && len(got) < len(want)
	}
	if ev := nextEvent(t, full); !bytes.Equal(ev.Object, stored.body) {
		t.Errorf("watch without the parameter:\n%s\nwant the stored object\n%s", ev.Object, stored.body)
	}
	if ev := nextEvent(t, omitted); !isWithout(ev.Object, stored.body) {
		t.Errorf("watch with the parameter:\n%s\nwant without managedFields\n%s", ev.Object, stored.body)
	}

	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	admin(t, "GET", base, nil).into(t, &list)
	if len(list.Items) != 1 || !bytes.Equal(list.Items[0], stored.body) {
		t.Errorf("list without the parameter: %s", list.Items)
	}
	for _, q := range []string{"", "&limit=10"} {
		admin(t, "GET", base+"?"+OmitManagedFieldsParam+"=true"+q, nil).into(t, &list)
		if len(list.Items) != 1 || !isWithout(list.Items[0], stored.body) {
			t.Errorf("list%s with the parameter: %s", q, list.Items)
		}
	}

	// An update with the parameter and without managedFields keeps the
	// stored entries, as any such update does.
	created.Labels["b"] = "2"
	created.ManagedFields = nil
	var updated corev1.Pod
	admin(t, "PUT", base+"/o1?"+OmitManagedFieldsParam+"=true", &created).into(t, &updated)
	if len(updated.ManagedFields) == 0 || !strings.Contains(string(admin(t, "GET", base+"/o1", nil).body), `"managedFields"`) {
		t.Fatalf("an update with the parameter lost managedFields: %+v", updated.ManagedFields)
	}
}
