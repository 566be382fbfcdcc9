package apiserver

import (
	"fmt"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCreateGetUpdateConflict(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	expect(t, admin(t, "POST", base, makePod("a").label("app", "x").obj()), 201)
	expect(t, admin(t, "POST", base, makePod("a").obj()), 409, "AlreadyExists")

	var pod corev1.Pod
	r := admin(t, "GET", base+"/a", nil)
	expect(t, r, 200, `"resourceVersion":"`)
	r.into(t, &pod)
	if pod.Status.Phase != corev1.PodPending || pod.UID == "" || pod.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("server fields not set: %+v", pod)
	}
	stale := pod.DeepCopy()
	pod.Labels["app"] = "y"
	expect(t, admin(t, "PUT", base+"/a", &pod), 200, `"app":"y"`)
	stale.Labels["app"] = "z"
	expect(t, admin(t, "PUT", base+"/a", stale), 409, "the object has been modified")

	// A status write keeps the spec; a main write keeps the status.
	admin(t, "GET", base+"/a", nil).into(t, &pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Spec.Containers[0].Image = "changed-through-status"
	expect(t, admin(t, "PUT", base+"/a/status", &pod), 200, `"phase":"Running"`)
	admin(t, "GET", base+"/a", nil).into(t, &pod)
	if pod.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("status write changed the spec: %s", pod.Spec.Containers[0].Image)
	}
	pod.Status.Phase = corev1.PodFailed
	expect(t, admin(t, "PUT", base+"/a", &pod), 200, `"phase":"Running"`)

	expect(t, admin(t, "DELETE", base+"/a", nil), 200, `"status":"Success"`)
	expect(t, admin(t, "GET", base+"/a", nil), 404, "NotFound")
}

func TestStrictDecodingAndValidationErrorsNameTheField(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"s"},"spec":{"containers":[{"name":"c","image":"busybox","imagePolicy":"x"}]}}`
	expect(t, admin(t, "POST", base, body), 400, `unknown field \"spec.containers[0].imagePolicy\"`)
	expect(t, admin(t, "POST", base+"?fieldValidation=Ignore", body), 201)
	expect(t, admin(t, "POST", base, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"v"},"spec":{"containers":[]}}`),
		422, `"field":"spec.containers"`)
	expect(t, admin(t, "POST", base, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"v"}}`), 400, "the URL is for")
	expect(t, admin(t, "POST", "/api/v1/namespaces/missing-ns/pods", makePod("p").obj()), 404, "namespaces")
}

func TestRequestBodyLimit(t *testing.T) {
	ns := newNamespace(t)
	big := strings.Repeat("x", 4<<20)
	pod := makePod("big").obj()
	pod.Annotations = map[string]string{"a": big}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", pod), 413)
}

func TestListSelectorsAndPagination(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	for i := 0; i < 25; i++ {
		b := makePod(fmt.Sprintf("p%02d", i)).label("parity", []string{"even", "odd"}[i%2])
		if i < 3 {
			b.node("n-sel")
		}
		expect(t, admin(t, "POST", base, b.obj()), 201)
	}
	var list corev1.PodList
	admin(t, "GET", base+"?labelSelector=parity%3Deven", nil).into(t, &list)
	if len(list.Items) != 13 {
		t.Fatalf("even pods = %d, want 13", len(list.Items))
	}
	admin(t, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn-sel", nil).into(t, &list)
	if len(list.Items) != 3 {
		t.Fatalf("pods on n-sel = %d, want 3", len(list.Items))
	}
	seen := map[string]bool{}
	cont := ""
	for page := 0; ; page++ {
		r := admin(t, "GET", base+"?limit=10&continue="+cont, nil)
		expect(t, r, 200)
		var l corev1.PodList
		r.into(t, &l)
		if len(l.Items) > 10 {
			t.Fatalf("page %d has %d items", page, len(l.Items))
		}
		for _, p := range l.Items {
			if seen[p.Name] {
				t.Fatalf("pod %s on two pages", p.Name)
			}
			seen[p.Name] = true
		}
		if page == 0 {
			// A write between pages does not show up: pages are consistent.
			expect(t, admin(t, "POST", base, makePod("zz-late").obj()), 201)
		}
		if l.Continue == "" {
			break
		}
		cont = l.Continue
	}
	if len(seen) != 25 {
		t.Fatalf("paged through %d pods, want 25", len(seen))
	}
}

func TestTableOutput(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("tbl").obj()), 201)
	r := admin(t, "GET", "/api/v1/namespaces/"+ns+"/pods", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var tbl metav1.Table
	r.into(t, &tbl)
	if tbl.Kind != "Table" || len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "tbl" || tbl.ColumnDefinitions[2].Name != "Status" {
		t.Fatalf("unexpected table: %s", r.body)
	}
}

func TestDiscoveryAndOpenAPI(t *testing.T) {
	expect(t, admin(t, "GET", "/apis", nil), 200, `"name":"resource.k8s.io"`, `"name":"apiextensions.k8s.io"`)
	expect(t, admin(t, "GET", "/api/v1", nil), 200, `"name":"pods/binding"`, `"name":"pods/status"`, `"shortNames":["po"]`)
	expect(t, admin(t, "GET", "/apis/resource.k8s.io/v1alpha2", nil), 200, `"name":"noderesourceslices"`)
	r := admin(t, "GET", "/openapi/v3", nil)
	expect(t, r, 200, `"apis/resource.k8s.io/v1alpha2"`)
	r = admin(t, "GET", "/openapi/v3/api/v1", nil)
	expect(t, r, 200, `"fieldValidation"`, `"x-kubernetes-group-version-kind"`, `"kind":"Pod"`)
	expect(t, admin(t, "GET", "/openapi/v2", nil), 200, `"swagger":"2.0"`)
}
