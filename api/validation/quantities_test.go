package validation

import (
	"math/big"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// An exponent beyond ±1000 is refused before anything compares the amount
// (apimachinery computes the power of ten to compare).
func TestQuantityExponentBounded(t *testing.T) {
	// Negative exponents are rounded up to 1n by the parser: the
	// as-written check refuses them (rounded), Validate sees 1n.
	for text, bad := range map[string]bool{"1e1000": false, "1e1001": true, "0E4444440": true, "1e400": false} {
		q := &corev1.ResourceQuota{ObjectMeta: objMeta("q", "default"), Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse(text)}}}
		errs := Validate(q)
		refused := len(errs) == 1 && errs[0].Field == "spec.hard[pods]" && strings.Contains(errs[0].Detail, "exponent")
		if refused != bad {
			t.Errorf("%s: %v", text, errs)
		}
		written := ValidateQuantitiesAsWritten(q, []byte(`{"spec":{"hard":{"pods":"`+text+`"}}}`))
		if (len(written) > 0) != bad {
			t.Errorf("%s as written: %v", text, written)
		}
	}
}

func TestTinyExponentsRefusedAsRounded(t *testing.T) {
	for _, text := range []string{"1e-10", "1e-1000", "1e-1001"} {
		q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse(text)}}}
		if errs := ValidateQuantitiesAsWritten(q, []byte(`{"spec":{"hard":{"pods":"`+text+`"}}}`)); len(errs) != 1 || errs[0].Field != "spec.hard[pods]" {
			t.Errorf("%s: %v", text, errs)
		}
	}
}

// A body whose quantity has a long exponent is refused before it is
// decoded (apimachinery's parser takes over a minute on 1e-99999999);
// the same text elsewhere is left alone.
func TestQuantityTextsBeforeDecoding(t *testing.T) {
	data := []byte(`{"metadata":{"annotations":{"a":"1e-99999999"}},"spec":{"hard":{"pods":"1e-99999999","cpu":"1e5","memory":"1e1001","x":"2e-1000"}}}`)
	var fields []string
	for _, e := range ValidateQuantityTexts(&corev1.ResourceQuota{}, data) {
		fields = append(fields, e.Field)
	}
	if got := strings.Join(fields, " "); got != "spec.hard[memory] spec.hard[pods]" {
		t.Fatalf("refused %q", got)
	}
	// A million digits take the parser seconds: the text is too long.
	long := strings.Repeat("9", 2000)
	data = []byte(`{"metadata":{"annotations":{"a":"` + long + `"}},"spec":{"hard":{"pods":"` + long + `","cpu":"` + strings.Repeat("9", 1000) + `"}}}`)
	errs := ValidateQuantityTexts(&corev1.ResourceQuota{}, data)
	if len(errs) != 1 || errs[0].Field != "spec.hard[pods]" || !strings.Contains(errs[0].Error(), "1024") {
		t.Fatalf("long text: %v", errs)
	}
}

// The as-written check decodes only the top-level fields that can hold a
// quantity (writtenParts); it answers as a decode of the whole body:
// metadata with managedFields, a status, fields in another case, a
// duplicate key and trailing text change nothing.
func TestQuantitiesAsWrittenReadsOnlyQuantityFields(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0000000001")}}}}}}
	const spec = `"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"0.0000000001"}}}]}`
	for name, body := range map[string]string{
		"plain":          `{` + spec + `}`,
		"managedFields":  `{"metadata":{"name":"p","managedFields":[{"manager":"m","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{}}}}]},` + spec + `,"status":{"phase":"Running"}}`,
		"duplicate spec": `{"spec":{"containers":[]},` + spec + `}`,
		"trailing text":  `{` + spec + `} trailing`,
	} {
		errs := ValidateQuantitiesAsWritten(pod, []byte(body))
		if len(errs) != 1 || errs[0].Field != "spec.containers[0].resources.requests[cpu]" {
			t.Errorf("%s: %v", name, errs)
		}
	}
	for name, body := range map[string]string{
		"spec in another case": `{"Spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"0.0000000001"}}}]}}`,
		"not an object":        `[` + `{` + spec + `}]`,
		"null":                 `null`,
	} {
		if errs := ValidateQuantitiesAsWritten(pod, []byte(body)); len(errs) != 0 {
			t.Errorf("%s: %v, want none (as a decode of the whole body reads it)", name, errs)
		}
	}
}

// The walks skip the fields that cannot hold a quantity and the empty
// ones without building their paths; every quantity is still visited,
// with its path, and the as-written check still names each.
func TestQuantityWalksVisitEveryQuantity(t *testing.T) {
	q := resource.MustParse
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("1Gi")}}}},
		Containers: []corev1.Container{
			{Name: "a"},
			{Name: "b", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("1"), "memory": q("2Gi")},
				Limits:   corev1.ResourceList{"cpu": q("2")}}},
		},
	}}
	var got []string
	QuantityFields(pod, func(p *field.Path, _ *resource.Quantity) { got = append(got, p.String()) })
	slices.Sort(got)
	want := []string{"spec.containers[1].resources.limits[cpu]", "spec.containers[1].resources.requests[cpu]",
		"spec.containers[1].resources.requests[memory]", "spec.initContainers[0].resources.limits[memory]"}
	if !slices.Equal(got, want) {
		t.Errorf("QuantityFields visits\n%v\nwant\n%v", got, want)
	}
	body := `{"spec":{"initContainers":[{"name":"i","resources":{"limits":{"memory":"1Gi"}}}],"containers":[{"name":"a"},` +
		`{"name":"b","resources":{"requests":{"cpu":"1","memory":"2Gi"},"limits":{"cpu":"0.0000000001"}}}]}}`
	pod.Spec.Containers[1].Resources.Limits["cpu"] = q("0.0000000001")
	errs := ValidateQuantitiesAsWritten(pod, []byte(body))
	if len(errs) != 1 || errs[0].Field != "spec.containers[1].resources.limits[cpu]" {
		t.Errorf("as written: %v", errs)
	}
}
