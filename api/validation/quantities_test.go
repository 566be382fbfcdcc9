package validation

import (
	"math/big"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestExactQuantity(t *testing.T) {
	for text, want := range map[string]string{
		"1": "1", "1.5": "3/2", "1Ki": "1024", "-2Mi": "-2097152", "1e3": "1000", "1E-3": "1/1000", "1n": "1/1000000000",
		"0.0000000001": "1/10000000000", "99999999999999999999999Ti": "109951162777599999999998900488372224",
		"100000000000000000000000000": "100000000000000000000000000", ".5m": "1/2000", "+3k": "3000",
	} {
		got, ok := ExactQuantity(text)
		w, _ := new(big.Rat).SetString(want)
		if !ok || got.Cmp(w) != 0 {
			t.Errorf("ExactQuantity(%q) = %v, %v; want %s", text, got, ok, want)
		}
	}
	for _, text := range []string{"", "x", "1Xi", "1e", "1e999999999", "--1"} {
		if _, ok := ExactQuantity(text); ok {
			t.Errorf("ExactQuantity(%q) accepted", text)
		}
	}
}

// Every quantity of an object is found by reflection, and those whose
// text would not read back as written are named.
func TestValidateQuantities(t *testing.T) {
	q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"requests.memory": resource.MustParse("99999999999999999999999Ti"),
		"pods":            resource.MustParse("10"),
	}}}
	errs := ValidateQuantities(q)
	if len(errs) != 1 || errs[0].Field != "spec.hard[requests.memory]" {
		t.Fatalf("quota: %v", errs)
	}
	s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Devices: []resourcev1.Device{{
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("100000000000000000000000000")}},
		ConsumesCounters: []resourcev1.DeviceCounterConsumption{{Counters: map[string]resourcev1.Counter{
			"a": {Value: resource.MustParse("1e400")}, "b": {Value: resource.MustParse("8Ei")}}}},
	}}}}
	var fields []string
	for _, e := range ValidateQuantities(s) {
		fields = append(fields, e.Field)
	}
	want := "spec.devices[0].capacity[memory].value spec.devices[0].consumesCounters[0].counters[b].value"
	if got := strings.Join(fields, " "); got != want {
		t.Fatalf("slice: %s, want %s", got, want)
	}
	// The decoder's check sees what the parser rounded.
	data := []byte(`{"spec":{"hard":{"requests.cpu":"0.0000000001","pods":"1.5n","limits.cpu":"1"}}}`)
	q = &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"requests.cpu": resource.MustParse("0.0000000001"), "pods": resource.MustParse("1.5n"), "limits.cpu": resource.MustParse("1")}}}
	fields = nil
	for _, e := range ValidateQuantitiesAsWritten(q, data) {
		fields = append(fields, e.Field)
	}
	if got := strings.Join(fields, " "); !strings.Contains(got, "spec.hard[requests.cpu]") || !strings.Contains(got, "spec.hard[pods]") || strings.Contains(got, "limits.cpu") {
		t.Fatalf("as written: %s", got)
	}
}
