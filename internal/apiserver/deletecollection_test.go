package apiserver

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
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
