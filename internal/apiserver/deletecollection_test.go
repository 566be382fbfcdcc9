package apiserver

import (
	"slices"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A node's token may delete the pods bound to it one by one, but a
// collection delete is decided before anything is deleted: the node gets
// 403 and every pod, its own included, is still there.
func TestDeleteCollectionIsAllOrNothing(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	expect(t, admin(t, "POST", pods, makePod("on-n1").node("n1").obj()), 201)
	expect(t, admin(t, "POST", pods, makePod("on-n2").node("n2").obj()), 201)

	expect(t, call(t, "node1", "DELETE", pods, nil), 403, "deletecollection")
	for _, name := range []string{"on-n1", "on-n2"} {
		var p corev1.Pod
		r := admin(t, "GET", pods+"/"+name, nil)
		expect(t, r, 200)
		r.into(t, &p)
		if p.DeletionTimestamp != nil {
			t.Fatalf("pod %s is being deleted after a refused collection delete", name)
		}
	}
	// Single deletes still follow the node rule.
	expect(t, call(t, "node1", "DELETE", pods+"/on-n2", nil), 403, "n2")
	expect(t, call(t, "node1", "DELETE", pods+"/on-n1", nil), 202)

	// A role allowed the collection deletes all of it.
	expect(t, call(t, "user", "DELETE", pods, nil), 200)
	var list corev1.PodList
	admin(t, "GET", pods, nil).into(t, &list)
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			t.Fatalf("pod %s not being deleted after the user's collection delete", p.Name)
		}
	}
}

// collectionPath is the cluster-wide collection path of a kind.
func collectionPath(k *kind) string {
	if k.gvk.Group == "" {
		return "/api/" + k.gvk.Version + "/" + k.resource
	}
	return "/apis/" + k.gvk.Group + "/" + k.gvk.Version + "/" + k.resource
}

// DELETE on the cluster-wide collection path of a namespaced resource
// answers 405, as Kubernetes does, for every namespaced kind served, and
// deletes nothing; the namespaced path still deletes the namespace's
// collection, and discovery still advertises deletecollection (a verb of
// the resource, served on its namespaced path).
func TestCrossNamespaceDeleteCollectionIsNotAllowed(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	expect(t, admin(t, "POST", pods, makePod("keep").obj()), 201)
	claims := "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims"
	expect(t, admin(t, "POST", claims, `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"keep"},
		"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}}}`), 201)

	namespaced := 0
	for _, k := range testAPI.reg.all() {
		if !k.namespaced {
			continue
		}
		namespaced++
		for _, token := range []string{"user", "admin"} {
			expect(t, call(t, token, "DELETE", collectionPath(k), nil), 405, "MethodNotAllowed", "one namespace at a time")
		}
	}
	if namespaced < 5 {
		t.Fatalf("only %d namespaced kinds served", namespaced)
	}
	for _, p := range []string{pods + "/keep", claims + "/keep"} {
		var m struct {
			Metadata struct{ DeletionTimestamp *string } `json:"metadata"`
		}
		r := admin(t, "GET", p, nil)
		expect(t, r, 200)
		r.into(t, &m)
		if m.Metadata.DeletionTimestamp != nil {
			t.Fatalf("%s is being deleted after refused cross-namespace collection deletes", p)
		}
	}

	var list metav1.APIResourceList
	admin(t, "GET", "/api/v1", nil).into(t, &list)
	for _, r := range list.APIResources {
		if r.Name == "pods" && !slices.Contains(r.Verbs, "deletecollection") {
			t.Fatalf("discovery of pods lost deletecollection: %v", r.Verbs)
		}
	}

	expect(t, call(t, "user", "DELETE", pods, nil), 200)
	expect(t, call(t, "user", "DELETE", claims, nil), 200)
	var left corev1.PodList
	admin(t, "GET", pods, nil).into(t, &left)
	for _, p := range left.Items {
		if p.DeletionTimestamp == nil {
			t.Fatalf("pod %s not being deleted after the namespaced collection delete", p.Name)
		}
	}
	// A cluster-scoped collection path still serves deletecollection:
	// the user is refused by the authorizer, not by the route.
	expect(t, call(t, "user", "DELETE", "/api/v1/nodes", nil), 403, "deletecollection")
}
