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

// Apply is authorized as the create or update it turns into, on the
// object or its status, with the same rules and denials as those writes.
func TestAuthorizationOfApply(t *testing.T) {
	ns := newNamespace(t)
	slices := "/apis/resource.k8s.io/v1alpha2/noderesourceslices/"
	seedSlice := func(name, node string) string {
		return `{"apiVersion":"resource.k8s.io/v1alpha2","kind":"NodeResourceSlice","metadata":{"name":"` + name +
			`"},"spec":{"nodeName":"` + node + `","driverName":"seed-apply.example.com","partitionable":{"resourceInstances":[{"name":"gpu-0"}]}}}`
	}
	v1Slices := "/apis/resource.k8s.io/v1/resourceslices/"
	v1Slice := func(name, node string) string {
		return `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"` + name + `"},"spec":{"driver":"apply.example.com",` +
			`"nodeName":"` + node + `","pool":{"name":"` + node + `","resourceSliceCount":1,"generation":1},"devices":[{"name":"gpu-0"}]}}`
	}
	claims := path1(ns, "resourceclaims") + "/"
	claim := func(name string) string {
		return `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"` + name + `"},` +
			`"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}`
	}
	claimStatus := func(name string) string {
		return `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"` + name + `"},` +
			`"status":{}}`
	}
	expect(t, admin(t, "POST", "/apis/resource.k8s.io/v1alpha2/noderesourceslices", seedSlice(ns+"-n2", "n2")), 201)
	deviceClass := `{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"` + ns + `-dc"},"spec":{}}`
	for _, tc := range []struct {
		name, token, path, body string
		code                    int
		want                    string
	}{
		{"node creates its seed slice", "node1", slices + ns + "-n1", seedSlice(ns+"-n1", "n1"), 201, ""},
		{"node updates its seed slice", "node1", slices + ns + "-n1", seedSlice(ns+"-n1", "n1"), 200, ""},
		{"node creates another node's slice", "node1", slices + ns + "-n3", seedSlice(ns+"-n3", "n3"), 403, "n1"},
		{"node updates another node's slice", "node1", slices + ns + "-n2", seedSlice(ns+"-n2", "n2"), 403, "n1"},
		{"user creates a slice", "user", slices + ns + "-u", seedSlice(ns+"-u", "n1"), 403, ""},
		{"node-driver creates its v1 slice", "applydriver", v1Slices + ns + "-nd", v1Slice(ns+"-nd", "apply-n9"), 201, ""},
		{"node-driver updates its v1 slice", "applydriver", v1Slices + ns + "-nd", v1Slice(ns+"-nd", "apply-n9"), 200, ""},
		{"node-driver creates another node's v1 slice", "applydriver", v1Slices + ns + "-nd2", v1Slice(ns+"-nd2", "n2"), 403, ""},
		{"user creates a claim", "user", claims + "c", claim("c"), 201, ""},
		{"user updates its claim", "user", claims + "c", claim("c"), 200, ""},
		{"user writes claim status", "user", claims + "c/status", claimStatus("c"), 403, ""},
		{"driver creates a claim", "driver", claims + "d", claim("d"), 403, ""},
		{"driver writes status of a claim not allocated its devices", "driver", claims + "c/status", claimStatus("c"), 403, "allocated a device"},
		{"user creates a device class", "user", "/apis/resource.k8s.io/v1/deviceclasses/" + ns + "-dc", deviceClass, 403, ""},
		{"scheduler writes claim status", "sched", claims + "c/status", claimStatus("c"), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, call(t, tc.token, "PATCH", tc.path+"?fieldManager=authz-test", tc.body, "Content-Type", applyPatchType), tc.code, tc.want)
		})
	}
}
