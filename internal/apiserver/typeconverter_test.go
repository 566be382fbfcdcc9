package apiserver

import (
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	corev1 "allot.dev/allot/api/core/v1"
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
}

// trackUpdate leaves the part a write cannot change out of the field
// manager's comparison; the managedFields it records are those of the
// whole objects.
func TestTrackUpdateLeavesOutTheUnchangedPart(t *testing.T) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	p := makePod("track").label("a", "1").obj()
	p.Namespace = "default"
	created, err := testAPI.trackUpdate(k, "", k.newObj(), p, "creator")
	if err != nil {
		t.Fatal(err)
	}
	live := created.(*corev1.Pod)
	status := live.DeepCopy()
	status.Status.Phase = corev1.PodRunning
	status.Status.Conditions = []corev1.PodCondition{{Type: "Ready", Status: "True"}}
	main := live.DeepCopy()
	main.Labels["b"] = "2"
	for _, tc := range []struct {
		sub string
		obj *corev1.Pod
	}{{"status", status}, {"", main}} {
		fm, err := k.fieldManager(tc.sub)
		if err != nil {
			t.Fatal(err)
		}
		whole := fm.UpdateNoErrors(live.DeepCopy(), tc.obj.DeepCopy(), "writer").(*corev1.Pod)
		got, err := testAPI.trackUpdate(k, tc.sub, live.DeepCopy(), tc.obj.DeepCopy(), "writer")
		if err != nil {
			t.Fatal(err)
		}
		if a, b := entriesWithoutTime(whole.ManagedFields), entriesWithoutTime(got.(*corev1.Pod).ManagedFields); a != b {
			t.Errorf("%q write: whole objects give\n%s\nleft-out part gives\n%s", tc.sub, a, b)
		}
	}
}

func entriesWithoutTime(es []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, e := range es {
		e.Time = nil
		out = append(out, fmt.Sprintf("%s %s %s %s", e.Manager, e.Operation, e.Subresource, e.FieldsV1.Raw))
	}
	return strings.Join(out, "\n")
}
