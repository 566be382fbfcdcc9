package apiserver

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// TestTypeConverterKeysDeviceStatus checks that status.devices of a v1
// claim is a list keyed by driver, pool, device and share ID: two
// drivers' entries are two fields, not one atomic list.
func TestTypeConverterKeysDeviceStatus(t *testing.T) {
	tc, err := builtinTypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	c := &resourcev1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Status: resourcev1.ResourceClaimStatus{Devices: []resourcev1.AllocatedDeviceStatus{
			{Driver: "a.example.com", Pool: "p", Device: "d0"},
			{Driver: "b.example.com", Pool: "p", Device: "d0"},
		}},
	}
	tv, err := tc.ObjectToTyped(c)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	want := fieldpath.MakePathOrDie("status", "devices", fieldpath.KeyByFields("device", "d0", "driver", "b.example.com", "pool", "p"))
	if !set.Has(want) {
		t.Errorf("field set lacks %s:\n%s", want, set)
	}
	_ = value.NewValueInterface
}
