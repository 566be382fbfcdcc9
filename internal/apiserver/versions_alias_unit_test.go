package apiserver

import (
	"net/http/httptest"
	"testing"
)

// convertAPIVersion rewrites the apiVersion fields naming the alias, in
// JSON (any spacing) and apply YAML, and nothing else: not other
// versions, not the escaped JSON of kubectl's last-applied annotation.
func TestConvertAPIVersion(t *testing.T) {
	const from, to = "resource.k8s.io/v1beta2", "resource.k8s.io/v1"
	for name, tc := range map[string]struct{ in, want string }{
		"json": {`{"apiVersion":"resource.k8s.io/v1beta2","kind":"DeviceTaintRule"}`, `{"apiVersion":"resource.k8s.io/v1","kind":"DeviceTaintRule"}`},
		"json spaced": {"{\n  \"apiVersion\" : \"resource.k8s.io/v1beta2\",\n  \"kind\": \"DeviceTaintRule\"\n}",
			"{\n  \"apiVersion\" : \"resource.k8s.io/v1\",\n  \"kind\": \"DeviceTaintRule\"\n}"},
		"managedFields":  {`{"metadata":{"managedFields":[{"apiVersion":"resource.k8s.io/v1beta2"}]}}`, `{"metadata":{"managedFields":[{"apiVersion":"resource.k8s.io/v1"}]}}`},
		"other version":  {`{"apiVersion":"resource.k8s.io/v1alpha3"}`, `{"apiVersion":"resource.k8s.io/v1alpha3"}`},
		"delete options": {`{"apiVersion":"v1","kind":"DeleteOptions"}`, `{"apiVersion":"v1","kind":"DeleteOptions"}`},
		"annotation": {`{"metadata":{"annotations":{"a":"{\"apiVersion\":\"resource.k8s.io/v1beta2\"}"}}}`,
			`{"metadata":{"annotations":{"a":"{\"apiVersion\":\"resource.k8s.io/v1beta2\"}"}}}`},
		"yaml":        {"apiVersion: resource.k8s.io/v1beta2\nkind: DeviceTaintRule\n", "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\n"},
		"yaml quoted": {"apiVersion: \"resource.k8s.io/v1beta2\"\nkind: DeviceTaintRule\n", "apiVersion: \"resource.k8s.io/v1\"\nkind: DeviceTaintRule\n"},
		"yaml list":   {"managedFields:\n- apiVersion: resource.k8s.io/v1beta2\n", "managedFields:\n- apiVersion: resource.k8s.io/v1\n"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := string(convertAPIVersion([]byte(tc.in), from, to)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// versionWriter converts a match split across writes, and leaves other
// versions alone.
func TestVersionWriter(t *testing.T) {
	out := `{"apiVersion":"resource.k8s.io/v1","items":[{"apiVersion":"resource.k8s.io/v1"},{"apiVersion":"resource.k8s.io/v1alpha2"}]}`
	for split := range len(out) {
		rec := httptest.NewRecorder()
		w := &versionWriter{w: rec, from: []byte(`"apiVersion":"resource.k8s.io/v1"`), to: []byte(`"apiVersion":"resource.k8s.io/v1alpha3"`)}
		w.WriteHeader(200)
		if _, err := w.Write([]byte(out[:split])); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(out[split:])); err != nil {
			t.Fatal(err)
		}
		w.finish()
		want := `{"apiVersion":"resource.k8s.io/v1alpha3","items":[{"apiVersion":"resource.k8s.io/v1alpha3"},{"apiVersion":"resource.k8s.io/v1alpha2"}]}`
		if got := rec.Body.String(); got != want {
			t.Fatalf("split at %d: %s", split, got)
		}
	}
}
