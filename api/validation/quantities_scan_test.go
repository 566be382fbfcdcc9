package validation

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// longExponentRE is what hasLongExponent scans for, as the regular
// expression ValidateQuantityTexts used before the scan replaced it.
var longExponentRE = regexp.MustCompile(`[0-9.][eE][+-]?[0-9]{4,}|[0-9]{1000}`)

func FuzzHasLongExponent(f *testing.F) {
	for _, s := range []string{"", "1e1234", "1e123", ".E-1234", "e1234", "x1e+12345", "1e+-1234", `{"a":"1.5e-99999999"}`,
		strings.Repeat("7", 999), strings.Repeat("7", 1000), strings.Repeat("7", 999) + "e" + strings.Repeat("7", 1000), "1ee1234", "1.e0000"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := hasLongExponent(data), longExponentRE.Match(data); got != want {
			t.Fatalf("hasLongExponent(%q) = %v, the expression says %v", data, got, want)
		}
	})
}

// A plain text is one the parser keeps exactly, within the exponent
// bound: the as-written comparison, run on it, finds nothing.
func FuzzPlainText(f *testing.F) {
	for _, s := range plainCases {
		f.Add(s.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		trimmed := strings.TrimSpace(text)
		if len(trimmed) > 1024 || !plainText([]byte(trimmed)) {
			return
		}
		q, err := resource.ParseQuantity(trimmed)
		if err != nil {
			return
		}
		if msg := exponentProblem(&q); msg != "" {
			t.Fatalf("%q is plain, but %s", text, msg)
		}
		written, ok := ExactQuantity(text)
		if !ok {
			return // "+", "-.": the full comparison passes over it too
		}
		if written.Cmp(ratOfQuantity(&q)) != 0 {
			t.Fatalf("%q is plain, but the parser reads %s", text, q.String())
		}
	})
}

var plainCases = []struct {
	text  string
	plain bool
}{
	{"100m", true}, {"1Gi", true}, {"2", true}, {"1.5Gi", true}, {"0.5", true}, {"+3k", true}, {"-2Mi", true},
	{"999999999999999999", true}, {"1n", true}, {"1.5u", true}, {"0.000000001", true}, {".5m", true}, {"1.", true},
	{"nginx", true}, {"", true}, {"k", true}, {"+", true}, {"example", true}, {"e1001", false}, {"-E5", false}, {"1abc", true}, {"default", true}, {"10.0.0.1", true},
	{"0.0000000001", false}, {"1.5n", false}, {"0.0001u", false}, {"0.0000001m", false},
	{"8Ei", false}, {"7Ei", false}, {"4095Pi", false}, {"99999999999999999999999Ti", false},
	{"1e3", false}, {"1E-3", false}, {"1e-99999999", false}, {"1234567890123456789", false},
	{"100000000000000000000000000", false},
}

func TestPlainText(t *testing.T) {
	for _, c := range plainCases {
		if got := plainText([]byte(c.text)); got != c.plain {
			t.Errorf("plainText(%q) = %v, want %v", c.text, got, c.plain)
		}
	}
}

func TestMayHoldInexactQuantity(t *testing.T) {
	for body, want := range map[string]bool{
		`{"metadata":{"name":"p-1"},"spec":{"containers":[{"name":"c","image":"busybox:1.36","resources":{"limits":{"cpu":"100m","memory":"1Gi"}}}],"priority":0}}`: false,
		`{"spec":{"hard":{"cpu":" 1.5 ","pods":10,"memory":1e3}}}`:                                                true, // a number with an exponent
		`{"spec":{"hard":{"cpu":"0.0000000001"}}}`:                                                                true,
		`{"spec":{"hard":{"cpu":"\u0031e-10"}}}`:                                                                  true, // an escape may spell anything
		`{"metadata":{"managedFields":[{"fieldsV1":{"k:{\"type\":\"Ready\"}":{}}}]},"spec":{"hard":{"cpu":"1"}}}`: false,
		`{"spec":{"hard":{"cpu":"\t1e-10"}}}`:                                                                     true,
		`{"spec":{"hard":{"memory":"8Ei"}}}`:                                                                      true,
		`{"spec":{"hard":{"memory":"` + strings.Repeat("9", 30) + `"}}}`:                                          true,
		`{"spec":{"hard":{"memory":"` + "\u00a0" + `0.0000000001"}}}`:                                             true, // TrimSpace trims U+00A0
		`{"spec":{"hard":{"pods":-12,"cpu":2.5}},"status":{"used":{"x":"3"}}}`:                                    false,
	} {
		if got := mayHoldInexactQuantity([]byte(body)); got != want {
			t.Errorf("mayHoldInexactQuantity(%s) = %v, want %v", body, got, want)
		}
	}
}

// FuzzAsWrittenFastPath writes a text into a quota's hard limits: where the
// scan passes the body, the full comparison finds nothing either.
func FuzzAsWrittenFastPath(f *testing.F) {
	for _, s := range plainCases {
		f.Add(s.text, false)
		f.Add(s.text, true)
	}
	f.Fuzz(func(t *testing.T, text string, number bool) {
		if len(text) > 1024 {
			return
		}
		quoted, _ := json.Marshal(text)
		if number {
			quoted = []byte(text)
		}
		data := []byte(`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"pods":` + string(quoted) + `,"cpu":"1"}}}`)
		if hasLongExponent(data) {
			return // refused before decoding (ValidateQuantityTexts' part)
		}
		q := &corev1.ResourceQuota{}
		if err := json.Unmarshal(data, q); err != nil {
			return
		}
		if mayHoldInexactQuantity(data) {
			return
		}
		if errs := quantitiesAsWritten(q, data); len(errs) > 0 {
			t.Fatalf("%s passed the scan, but: %v", data, errs)
		}
	})
}

// BenchmarkQuantityChecks is the API server's two quantity checks of a
// pod status write's body (four containers with requests and limits, its
// managedFields): with the scans, and as before them (the regular
// expression; the generic decode and comparison of every quantity).
func BenchmarkQuantityChecks(b *testing.B) {
	p := fourContainerPod()
	p.Name, p.Namespace = "web-1", "default"
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: "Ready", Status: "True"}}
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	managed := `"managedFields":[{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-12-07T17:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:status":{},"f:type":{}}},"f:phase":{}}}}],`
	data = []byte(strings.Replace(string(data), `"metadata":{`, `"metadata":{`+managed, 1))
	if err := json.Unmarshal(data, p); err != nil {
		b.Fatal(err)
	}
	b.Run("texts/scan", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if ValidateQuantityTexts(p, data) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("texts/regexp", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if longExponentRE.Match(data) {
				b.Fatal("matched")
			}
		}
	})
	b.Run("asWritten/scan", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if ValidateQuantitiesAsWritten(p, data) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("asWritten/full", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if quantitiesAsWritten(p, data) != nil {
				b.Fatal("refused")
			}
		}
	})
}

// BenchmarkValidateQuantities is the canonical-form check every write of a
// kind with quantities runs, on the pod of BenchmarkQuantityChecks.
func BenchmarkValidateQuantities(b *testing.B) {
	p := fourContainerPod()
	b.ReportAllocs()
	for range b.N {
		if ValidateQuantities(p) != nil {
			b.Fatal("refused")
		}
	}
}

// fourContainerPod is a pod of four containers with requests and limits.
func fourContainerPod() *corev1.Pod {
	p := &corev1.Pod{}
	for _, c := range []string{"a", "b", "c", "d"} {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "registry.example/web:1.2.3", Command: []string{"sleep", "3600"},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{"cpu": resource.MustParse("1.5"), "memory": resource.MustParse("1Gi")}}})
	}
	return p
}
