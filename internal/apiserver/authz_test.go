package apiserver

import (
	"testing"
)

func TestAuthorizationEndToEnd(t *testing.T) {
	ns := newNamespace(t)
	expect(t, call(t, "", "GET", "/api/v1/pods", nil), 401)
	expect(t, call(t, "", "GET", "/healthz", nil), 200, "ok")

	slices := "/apis/resource.k8s.io/v1alpha2/noderesourceslices"
	slice := func(name, node string) string {
		return `{"apiVersion":"resource.k8s.io/v1alpha2","kind":"NodeResourceSlice","metadata":{"name":"` + name +
			`"},"spec":{"nodeName":"` + node + `","driverName":"gpu.example.com","partitionable":{"resourceInstances":[{"name":"gpu-0"}]}}}`
	}
	expect(t, call(t, "node1", "POST", slices, slice("n1-gpu", "n1")), 201)
	expect(t, call(t, "node1", "POST", slices, slice("n2-gpu", "n2")), 403, "n1")
	expect(t, call(t, "user", "POST", slices, slice("u-gpu", "n1")), 403)

	classParams := `{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClassParameters","metadata":{"name":"cp"},
		"filters":[{"driverName":"gpu.example.com","partitionable":{"selector":"true"}}]}`
	expect(t, call(t, "user", "POST", "/apis/resource.k8s.io/v1alpha2/resourceclassparameters", classParams), 403)

	// A driver writes status only of claims whose class names it.
	expect(t, admin(t, "POST", "/apis/resource.k8s.io/v1alpha2/resourceclasses",
		`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClass","metadata":{"name":"other-class"},"driverName":"other.example.com"}`), 201)
	claims := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	expect(t, call(t, "user", "POST", claims, makeClaim("theirs", "other-class")), 201)
	r := admin(t, "GET", claims+"/theirs", nil)
	expect(t, call(t, "driver", "PUT", claims+"/theirs/status", r.body), 403)
	expect(t, call(t, "user", "PUT", claims+"/theirs/status", r.body), 403)
}
