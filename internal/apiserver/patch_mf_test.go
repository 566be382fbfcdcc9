package apiserver

import (
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// TestPatchWithoutManagedFieldsIsTheSame: a patch applied to the stored
// object without its managedFields (patchTarget) answers and stores what
// the patch applied to the whole object does, for every patch type, on
// the object and its status, and for patches that name managedFields
// (a reset, spelled plainly or with an escape), which take the whole
// object.
func TestPatchWithoutManagedFieldsIsTheSame(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	const (
		merge     = "application/merge-patch+json"
		jsonPatch = "application/json-patch+json"
		strategic = "application/strategic-merge-patch+json"
	)
	for i, tc := range []struct {
		name, sub, ct, patch string
	}{
		{"merge label", "", merge, `{"metadata":{"labels":{"x":"1"}}}`},
		{"merge label removed", "", merge, `{"metadata":{"labels":{"a":null}}}`},
		{"merge status", "/status", merge, `{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`},
		{"json patch", "", jsonPatch, `[{"op":"add","path":"/metadata/labels/y","value":"2"}]`},
		{"json patch of metadata", "", jsonPatch, `[{"op":"replace","path":"/metadata/labels","value":{"z":"3"}}]`},
		{"strategic toleration", "", strategic, `{"spec":{"tolerations":[{"key":"k","operator":"Exists"}]}}`},
		{"strategic status", "/status", strategic, `{"status":{"podIP":"10.0.0.9"}}`},
		{"no change", "", merge, `{"metadata":{"labels":{"a":"1"}}}`},
		{"reset", "", merge, `{"metadata":{"managedFields":[],"labels":{"r":"1"}}}`},
		{"reset escaped", "", merge, `{"metadata":{"managed\u0046ields":[],"labels":{"r":"2"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers := make([]corev1.Pod, 2)
			for j, whole := range []bool{false, true} {
				name := fmt.Sprintf("pmf-%d-%d", i, j)
				expect(t, call(t, "admin", "POST", base, makePod(name).label("a", "1").obj(), "User-Agent", "creator/1"), 201)
				expect(t, call(t, "admin", "PATCH", base+"/"+name+"/status", `{"status":{"phase":"Pending","hostIP":"10.0.0.1"}}`,
					"Content-Type", merge, "User-Agent", "node/1"), 200)
				patchKeepsManagedFields.Store(whole)
				r := call(t, "admin", "PATCH", base+"/"+name+tc.sub, tc.patch, "Content-Type", tc.ct, "User-Agent", "patcher/1")
				patchKeepsManagedFields.Store(false)
				expect(t, r, 200)
				r.into(t, &answers[j])
				var stored corev1.Pod
				admin(t, "GET", base+"/"+name, nil).into(t, &stored)
				if !reflect.DeepEqual(comparable(stored), comparable(answers[j])) {
					t.Errorf("stored differs from the answer:\n%+v\n%+v", stored, answers[j])
				}
			}
			if got, want := comparable(answers[0]), comparable(answers[1]); !reflect.DeepEqual(got, want) {
				t.Errorf("without managedFields:\n%+v\nwith them:\n%+v", got, want)
			}
			if reset := i >= 8; !reset && len(answers[0].ManagedFields) < 2 || reset && len(answers[0].ManagedFields) != 0 {
				t.Errorf("managers %v", answers[0].ManagedFields)
			}
		})
	}
}

// comparable is p without what differs between twins: name, uid,
// resourceVersion and times.
func comparable(p corev1.Pod) corev1.Pod {
	p = *p.DeepCopy()
	p.Name, p.UID, p.ResourceVersion, p.CreationTimestamp = "", "", "", metav1.Time{}
	for i := range p.ManagedFields {
		p.ManagedFields[i].Time = nil
	}
	return p
}
