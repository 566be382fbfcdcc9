package apiserver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// cacheDecodeCase is a stored value as the watch cache meets it: an
// object of a hot kind with the managedFields of its writers.
type cacheDecodeCase struct {
	name   string
	k      *kind
	stored []byte
}

// cacheDecodeCases are BenchmarkDRA's most written kinds as stored: a
// bound, running pod (creator, scheduler, node), a seed claim and a v1
// claim (creator, scheduler, driver), an event (creator).
func cacheDecodeCases(t testing.TB) []cacheDecodeCase {
	t.Helper()
	pods := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	v1Claims := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	seedClaims := testAPI.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclaims"))
	events := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "events"))

	c := makeClaim("seed", "gpu")
	c.Namespace, c.UID = "default", "s1"
	c.Labels = map[string]string{"app": "web"}
	created := stored(t, seedClaims, "", c)
	alloc := created.DeepCopy()
	alloc.Status.DriverName = "gpu.example.com"
	alloc.Status.Allocation = &resourcev1alpha2.AllocationResult{Shareable: true}
	alloc.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p1"}}
	seed := storedBy(t, seedClaims, "status", created, alloc, "scheduler")

	ev := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "cmp.1", Namespace: "default", UID: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "cmp", UID: "p1"},
		Reason:         "Scheduled", Message: "Successfully assigned default/cmp to n1", Type: "Normal",
		FirstTimestamp: metav1.Unix(100, 0), LastTimestamp: metav1.Unix(100, 0), Count: 1,
		Source: corev1.EventSource{Component: "scheduler"}}
	ev.CreationTimestamp = metav1.Time{Time: time.Unix(100, 0)}

	enc := func(k *kind, obj runtime.Object) []byte {
		data, err := encodeForStorage(k, obj)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	pod := storedPod(t, pods)
	pod.Spec.NodeName = "n1"
	return []cacheDecodeCase{
		{"pod", pods, enc(pods, pod)},
		{"seedclaim", seedClaims, enc(seedClaims, seed)},
		{"v1claim", v1Claims, enc(v1Claims, storedClaim(t, v1Claims))},
		{"event", events, enc(events, stored(t, events, "", ev))},
	}
}

// BenchmarkCacheDecode is the watch cache's decode of one stored change
// (decoderFor: labels and selectable fields) of the kinds BenchmarkDRA
// writes most.
func BenchmarkCacheDecode(b *testing.B) {
	for _, c := range cacheDecodeCases(b) {
		dec := testAPI.decoderFor(c.k)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.stored)))
			for range b.N {
				if _, err := dec("k", c.stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCacheDecoderAgreesWithFullDecode: the watch cache's decode, which
// skips managedFields (and reads a pod through lightPod), yields the
// labels and fields of the whole object as every other read decodes it;
// the kinds whose decoded object it keeps keep their managedFields.
func TestCacheDecoderAgreesWithFullDecode(t *testing.T) {
	nodes := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "nodes"))
	n := makeNode("cd-n1", map[string]string{"zone": "a"})
	node, err := encodeForStorage(nodes, stored(t, nodes, "", n))
	if err != nil {
		t.Fatal(err)
	}
	cases := append(cacheDecodeCases(t), cacheDecodeCase{"node", nodes, node})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj, err := decodeStored(c.k, c.stored, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(mustAccessor(t, obj).GetManagedFields()) == 0 {
				t.Fatal("fixture has no managedFields")
			}
			want := c.k.storedKind(c.stored).fieldSet(obj)
			if c.k.sibling != nil {
				siblingFields(c.k.storedKind(c.stored), obj, want)
				want[StoredVersionField] = c.k.storedKind(c.stored).gvk.GroupVersion().String()
			}
			got, err := testAPI.decoderFor(c.k)("k", c.stored)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Fields, map[string]string(want)) {
				t.Errorf("fields %v, want %v", got.Fields, want)
			}
			if !reflect.DeepEqual(got.Labels, labelsOf(obj)) {
				t.Errorf("labels %v, want %v", got.Labels, labelsOf(obj))
			}
			if got.Object != nil && !reflect.DeepEqual(got.Object, obj) {
				t.Errorf("kept object differs from decodeStored's:\n%#v\n%#v", got.Object, obj)
			}
		})
	}
}

// TestStoredDecodeIsEncodingJSONs: decodeStored's options (unmarshalTime)
// decode every stored fixture to the object encoding/json v1 decodes, and
// unmarshalTime reads every JSON value as metav1.Time.UnmarshalJSON does.
func TestStoredDecodeIsEncodingJSONs(t *testing.T) {
	for _, c := range cacheDecodeCases(t) {
		obj, err := decodeStored(c.k, c.stored, 7)
		if err != nil {
			t.Fatal(err)
		}
		want := c.k.storedKind(c.stored).newObj()
		if err := json.Unmarshal(c.stored, want); err != nil {
			t.Fatal(err)
		}
		setRV(want, 7)
		want.GetObjectKind().SetGroupVersionKind(c.k.storedKind(c.stored).gvk)
		if !reflect.DeepEqual(obj, want) {
			t.Errorf("%s: decodeStored\n%#v\nencoding/json\n%#v", c.name, obj, want)
		}
	}
	for _, in := range []string{`null`, `"2026-12-07T17:28:39Z"`, `"2026-12-07T17:28:39.123456789+02:00"`,
		`"2026-12-07T17:28:39\u002e5Z"`, `"2026-12-07"`, `""`, `1`, `{}`, `true`} {
		var want, got metav1.Time
		wantErr := want.UnmarshalJSON([]byte(in))
		gotErr := jsonv2.Unmarshal([]byte(in), &got, storedJSON)
		if (wantErr != nil) != (gotErr != nil) || got != want {
			t.Errorf("%s: got %v (%v), want %v (%v)", in, got, gotErr, want, wantErr)
		}
		var wantP, gotP struct {
			T *metav1.Time `json:"t"`
		}
		doc := []byte(`{"t":` + in + `}`)
		wantErr, gotErr = json.Unmarshal(doc, &wantP), jsonv2.Unmarshal(doc, &gotP, storedJSON)
		if (wantErr != nil) != (gotErr != nil) || (wantP.T == nil) != (gotP.T == nil) || wantP.T != nil && *wantP.T != *gotP.T {
			t.Errorf("pointer %s: got %v (%v), want %v (%v)", in, gotP.T, gotErr, wantP.T, wantErr)
		}
	}
}

// BenchmarkDecodeStored is the decode of a stored object every update and
// delete starts from (decodeStored: the whole object, managedFields
// included), and (plain) the same decode without storedJSON's options.
func BenchmarkDecodeStored(b *testing.B) {
	for _, c := range cacheDecodeCases(b) {
		for _, mode := range []string{"", "/plain"} {
			b.Run(c.name+mode, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(c.stored)))
				for range b.N {
					var err error
					if mode == "" {
						_, err = decodeStored(c.k, c.stored, 1)
					} else {
						err = jsonv2.Unmarshal(c.stored, c.k.storedKind(c.stored).newObj())
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
