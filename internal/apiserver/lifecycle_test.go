package apiserver

import (
	"fmt"
	"sync"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

func TestClaimQuotaIsAtomicWithCreate(t *testing.T) {
	ns := newNamespace(t)
	claims := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	expect(t, admin(t, "POST", claims, makeClaim("before", "gpu")), 201)
	quota := `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{
		"count/resourceclaims.resource.k8s.io":"4","gpu.resourceclass.resource.k8s.io/resourceclaims":"2"}}}`
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/resourcequotas", quota), 201,
		`"gpu.resourceclass.resource.k8s.io/resourceclaims":"1"`)

	// Ten concurrent creates of class gpu: exactly one more fits.
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = admin(t, "POST", claims, makeClaim(fmt.Sprintf("g%d", i), "gpu")).code
		}()
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		if c == 201 {
			created++
		} else if c != 403 {
			t.Fatalf("unexpected code %d", c)
		}
	}
	if created != 1 {
		t.Fatalf("created %d gpu claims, want 1 (codes %v)", created, codes)
	}
	expect(t, admin(t, "POST", claims, makeClaim("g-over", "gpu")), 403, "exceeded quota: q")
	// Another class still fits the total.
	expect(t, admin(t, "POST", claims, makeClaim("fpga", "fpga")), 201)
	// Deleting frees quota.
	expect(t, admin(t, "DELETE", claims+"/before", nil), 200)
	expect(t, admin(t, "POST", claims, makeClaim("g-after", "gpu")), 201)
	var q corev1.ResourceQuota
	admin(t, "GET", "/api/v1/namespaces/"+ns+"/resourcequotas/q", nil).into(t, &q)
	if u := q.Status.Used["count/resourceclaims.resource.k8s.io"]; u.Value() != 3 {
		t.Fatalf("total used = %s, want 3", u.String())
	}
}

func TestFinalizersAndGracefulPodDeletion(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	expect(t, admin(t, "POST", pods, makePod("bound").node("n1").obj()), 201)
	// A bound pod only gets its deletionTimestamp; its node completes it.
	expect(t, admin(t, "DELETE", pods+"/bound", nil), 202, `"deletionTimestamp"`, `"deletionGracePeriodSeconds":30`)
	expect(t, admin(t, "GET", pods+"/bound", nil), 200)
	expect(t, admin(t, "DELETE", pods+"/bound?gracePeriodSeconds=0", nil), 200, "Success")
	expect(t, admin(t, "GET", pods+"/bound", nil), 404)

	claims := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	c := makeClaim("fin", "gpu")
	c.Finalizers = []string{"example.com/hold"}
	expect(t, admin(t, "POST", claims, c), 201)
	expect(t, admin(t, "DELETE", claims+"/fin", nil), 202, `"deletionTimestamp"`)
	var cur resourcev1alpha2.ResourceClaim
	admin(t, "GET", claims+"/fin", nil).into(t, &cur)
	cur.Finalizers = append(cur.Finalizers, "example.com/more")
	expect(t, admin(t, "PUT", claims+"/fin", &cur), 422, "no new finalizers")
	expect(t, admin(t, "PATCH", claims+"/fin", `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json"), 200)
	expect(t, admin(t, "GET", claims+"/fin", nil), 404)
}

func TestNamespaceDeletionWaitsForFinalize(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "DELETE", "/api/v1/namespaces/"+ns, nil), 202, `"phase":"Terminating"`)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("late").obj()), 403, "being terminated")
	var n corev1.Namespace
	admin(t, "GET", "/api/v1/namespaces/"+ns, nil).into(t, &n)
	n.Spec.Finalizers = nil
	expect(t, admin(t, "PUT", "/api/v1/namespaces/"+ns+"/finalize", &n), 200)
	expect(t, admin(t, "GET", "/api/v1/namespaces/"+ns, nil), 404)
}

func TestPatchTypes(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	p := makePod("pt").obj()
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "busybox"})
	expect(t, admin(t, "POST", pods, p), 201)
	// Strategic merge: containers merge by name.
	expect(t, admin(t, "PATCH", pods+"/pt", `{"metadata":{"labels":{"a":"1"}}}`, "Content-Type", "application/strategic-merge-patch+json"), 200, `"a":"1"`, `"name":"d"`)
	expect(t, admin(t, "PATCH", pods+"/pt", `[{"op":"add","path":"/metadata/labels/b","value":"2"}]`, "Content-Type", "application/json-patch+json"), 200, `"b":"2"`)
	expect(t, admin(t, "PATCH", pods+"/pt", `{"spec":{"containers":[{"name":"c","image":"other"}]}}`, "Content-Type", "application/merge-patch+json"), 422, "spec")
	expect(t, admin(t, "PATCH", pods+"/pt?fieldManager=t", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pt\n  labels:\n    c: \"3\"\n", "Content-Type", "application/apply-patch+yaml"), 200, `"c":"3"`, `"a":"1"`, `"name":"d"`)
	expect(t, admin(t, "PATCH", pods+"/pt", `{}`, "Content-Type", "application/apply-patch+yaml"), 422, "fieldManager")
	expect(t, admin(t, "PATCH", pods+"/pt", `{}`, "Content-Type", "text/plain"), 415)
	expect(t, admin(t, "PATCH", pods+"/pt", `{"metadata":{"resourceVersion":"1"}}`, "Content-Type", "application/merge-patch+json"), 409)
}

// New pods get Kubernetes' default node-loss tolerations (300 s of the
// not-ready and unreachable NoExecute taints) unless they tolerate those
// taints themselves; a pod's own toleration is kept as written.
func TestDefaultNodeLossTolerations(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	var plain corev1.Pod
	admin(t, "POST", pods, makePod("plain").obj()).into(t, &plain)
	got := map[string]int64{}
	for _, tol := range plain.Spec.Tolerations {
		if tol.Effect == corev1.TaintEffectNoExecute && tol.Operator == corev1.TolerationOpExists && tol.TolerationSeconds != nil {
			got[tol.Key] = *tol.TolerationSeconds
		}
	}
	if got[corev1.TaintNodeNotReady] != 300 || got[corev1.TaintNodeUnreachable] != 300 || len(plain.Spec.Tolerations) != 2 {
		t.Fatalf("tolerations %+v, want not-ready and unreachable for 300 s", plain.Spec.Tolerations)
	}
	// A replace without them (kubectl replace of the manifest) gets them
	// back, as stored: tolerations may not be removed.
	plain.Spec.Tolerations = nil
	var replaced corev1.Pod
	admin(t, "PUT", pods+"/plain", &plain).into(t, &replaced)
	if len(replaced.Spec.Tolerations) != 2 {
		t.Fatalf("after a replace without tolerations: %+v, want the two defaults", replaced.Spec.Tolerations)
	}
	own := makePod("own").obj()
	ten := int64(10)
	own.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &ten}}
	var out corev1.Pod
	admin(t, "POST", pods, own).into(t, &out)
	if len(out.Spec.Tolerations) != 2 || *out.Spec.Tolerations[0].TolerationSeconds != 10 || out.Spec.Tolerations[1].Key != corev1.TaintNodeNotReady {
		t.Fatalf("tolerations %+v, want the pod's own for unreachable and the default for not-ready", out.Spec.Tolerations)
	}
}
