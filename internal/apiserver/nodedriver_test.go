package apiserver

import (
	"net/url"
	"testing"
)

// A node-driver lists and watches ResourceSlices only with a field
// selector for its driver and node: the server hands the authorizer the
// parsed selector, after refusing a malformed one with 400.
func TestNodeDriverSliceSelector(t *testing.T) {
	slices := "/apis/resource.k8s.io/v1/resourceslices"
	own := "?fieldSelector=" + url.QueryEscape("spec.driver=gpu.example.com,spec.nodeName=n1")
	expect(t, call(t, "ndriver", "GET", slices+own, nil), 200, `"kind":"ResourceSliceList"`)
	expect(t, call(t, "ndriver", "GET", slices+"?fieldSelector="+url.QueryEscape("spec.nodeName=n1,spec.driver==gpu.example.com,spec.pool.name=p"), nil), 200)
	expect(t, call(t, "ndriver", "GET", slices, nil), 403, "must list resourceslices with fieldSelector spec.driver=gpu.example.com,spec.nodeName=n1")
	expect(t, call(t, "ndriver", "GET", slices+"?fieldSelector="+url.QueryEscape("spec.driver=gpu.example.com,spec.nodeName=n2"), nil), 403)
	expect(t, call(t, "ndriver", "GET", slices+"?fieldSelector="+url.QueryEscape("spec.driver=gpu.example.com,spec.nodeName!=n2"), nil), 403)
	expect(t, call(t, "ndriver", "GET", slices+"?fieldSelector=spec.driver%3D%3D%3D", nil), 400, "invalid fieldSelector")

	expect(t, call(t, "ndriver", "GET", slices+own+"&watch=true&timeoutSeconds=1", nil), 200)
	expect(t, call(t, "ndriver", "GET", slices+"?watch=true&timeoutSeconds=1", nil), 403, "must watch resourceslices")
	expect(t, call(t, "ndriver", "GET", slices+"?watch=true&timeoutSeconds=1&fieldSelector=spec.driver%3Dgpu.example.com", nil), 403)

	expect(t, call(t, "ndriver", "DELETE", slices+own, nil), 403)
	expect(t, call(t, "ndriver", "GET", "/api/v1/nodes/n2", nil), 403, "only get its own Node")
	expect(t, call(t, "ndriver", "GET", "/api/v1/pods", nil), 403)
}

// A node-driver's claim read: a missing claim is a 404 (allowed, as
// upstream RBAC), a claim not allocated its driver's device a 403.
func TestNodeDriverClaimGet(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("unallocated")), 201)
	expect(t, call(t, "ndriver", "GET", path1(ns, "resourceclaims")+"/gone", nil), 404)
	expect(t, call(t, "ndriver", "GET", path1(ns, "resourceclaims")+"/unallocated", nil), 403, "allocated a device of driver")
	expect(t, call(t, "ndriver", "GET", path2(ns, "resourceclaims")+"/unallocated", nil), 403)
	expect(t, call(t, "ndriver", "GET", path1(ns, "resourceclaims"), nil), 403)
}
