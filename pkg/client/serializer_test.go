package client

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

var typeMetaCases = []string{
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`,
	`{"metadata":{"name":"a","labels":{"kind":"x"}},"kind":"Pod","apiVersion":"v1"}`,
	` { "kind" : "Event" , "apiVersion" : "events.k8s.io/v1" } `,
	`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1"}}`,
	`{"kind":"A","kind":"B","apiVersion":"g/v1"}`,
	`{"KIND":"Pod","ApiVersion":"v1"}`,
	`{"kind":"Pod","apiVersion":"v1","spec":{"a":[1,2,{"b":"}]\"{"}],"c":-1.5e3,"d":true,"e":null}}`,
	`{"kind":"P\u006fd","apiVersion":"v1"}`,
	`{"k\u0069nd":"Pod","apiVersion":"v1"}`,
	`{"kind":null,"apiVersion":"v1"}`,
	`{"kind":3,"apiVersion":"v1"}`,
	`{"\u212aind":"Pod","apiVersion":"v1"}`,
	`{"kind":"Pod","apiVersion":"a/b/c"}`,
	`{}`,
	`{"metadata":{}}`,
	`[]`,
	`{"kind":"Pod"`,
	`{"kind":"Pod",}`,
	`{"kind" "Pod"}`,
	`{"kind":"Pod"} trailing`,
	`{"a":"unterminated}`,
	`{"a":[1,2}`,
	``,
	`null`,
	`{"a":tru,"kind":"Pod"}`,
}

// The scan agrees with the default MetaFactory on every case: the same
// group, version and kind, or an error from both.
func TestTopLevelMetaAgreesWithDefault(t *testing.T) {
	for _, in := range typeMetaCases {
		checkTypeMeta(t, []byte(in))
	}
}

func FuzzTopLevelMeta(f *testing.F) {
	for _, in := range typeMetaCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkTypeMeta(t, in) })
}

func checkTypeMeta(t *testing.T, in []byte) {
	t.Helper()
	want, wantErr := json.DefaultMetaFactory.Interpret(in)
	got, gotErr := topLevelMeta{}.Interpret(in)
	if (wantErr == nil) != (gotErr == nil) {
		// The scan accepts malformed documents the decoder rejects next;
		// it must never reject what the default accepts.
		if gotErr != nil {
			t.Fatalf("%q: scan failed (%v) where the default gave %v", in, gotErr, want)
		}
		return
	}
	if wantErr == nil && *got != *want {
		t.Fatalf("%q: scan %v, default %v", in, got, want)
	}
}
