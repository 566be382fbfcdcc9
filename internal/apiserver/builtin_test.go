package apiserver

import (
	"reflect"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
)

// The watch cache's light pod decoder must agree with the full one.
func TestLightPodDecodeMatchesFullDecode(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	p := makePod("light").label("app", "x").node("n9").obj()
	p.Namespace = "ns1"
	p.Spec.SchedulerName, p.Spec.RestartPolicy = "other", corev1.RestartPolicyNever
	p.Status.Phase = corev1.PodRunning
	data, err := encodeForStorage(k, p)
	if err != nil {
		t.Fatal(err)
	}
	light, err := testAPI.decoderFor(k)("k", data)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeStored(k, data, 1)
	if err != nil {
		t.Fatal(err)
	}
	if full := k.fieldSet(obj); !reflect.DeepEqual(map[string]string(full), light.Fields) {
		t.Fatalf("fields differ:\nfull  %v\nlight %v", full, light.Fields)
	}
	if !reflect.DeepEqual(labelsOf(obj), light.Labels) {
		t.Fatalf("labels differ: %v vs %v", labelsOf(obj), light.Labels)
	}
}
