package apiserver

import (
	"strings"
	"testing"
)

// listMapCRD has a keyed list (spec.ports by name) and an atomic map.
const listMapCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.apply.example.com}
spec:
  group: apply.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                additionalProperties: {type: string}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
`

// applyManifests is one object of each family: a core/v1 kind (allot's
// subset), a resource.k8s.io/v1 kind (k8s.io/api's types), a seed
// v1alpha2 kind (allot's own types) and a custom resource.
func applyManifests(ns, value string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: ` + value + `}}
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: ` + ns + `-gpu, labels: {tier: ` + value + `}}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClass
metadata: {name: ` + ns + `-seed, labels: {tier: ` + value + `}}
driverName: gpu.example.com
---
apiVersion: apply.example.com/v1
kind: Widget
metadata: {name: w}
spec:
  size: ` + value + `
  ports: [{name: http, port: 80}]
`
}

// kubectl apply --server-side and diff --server-side on every family of
// kinds; a second manager's conflicting apply fails naming the field
// until --force-conflicts.
func TestKubectlServerSideApply(t *testing.T) {
	kubectlBin(t)
	ns := newNamespace(t)
	mustKubectl := func(stdin string, wantCode int, want []string, args ...string) string {
		t.Helper()
		out, code := kubectl(t, ns, stdin, args...)
		if code != wantCode {
			t.Fatalf("kubectl %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("kubectl %s: output lacks %q\n%s", strings.Join(args, " "), w, out)
			}
		}
		return out
	}
	mustKubectl(listMapCRD, 0, []string{"serverside-applied"}, "apply", "--server-side", "-f", "-")
	mustKubectl(applyManifests(ns, "one"), 0, []string{"pod/web serverside-applied", "deviceclass.resource.k8s.io/" + ns + "-gpu serverside-applied",
		"resourceclass.resource.k8s.io/" + ns + "-seed serverside-applied", "widget.apply.example.com/w serverside-applied"},
		"apply", "--server-side", "-f", "-")
	// diff(1) exits 1 on differences; one per object.
	mustKubectl(applyManifests(ns, "two"), 1, []string{"-    app: one", "+    app: two", "-    tier: one", "+    tier: two", "-  size: one", "+  size: two"},
		"diff", "--server-side", "-f", "-")
	mustKubectl(applyManifests(ns, "two"), 0, nil, "apply", "--server-side", "-f", "-")
	mustKubectl(applyManifests(ns, "two"), 0, nil, "diff", "--server-side", "-f", "-")
	expect(t, admin(t, "GET", "/api/v1/namespaces/"+ns+"/pods/web", nil), 200, `"app":"two"`, `"manager":"kubectl"`, `"operation":"Apply"`)

	other := applyManifests(ns, "three")
	mustKubectl(other, 1, []string{"conflict", ".metadata.labels.app", `"kubectl"`}, "apply", "--server-side", "--field-manager=other", "-f", "-")
	mustKubectl(other, 0, []string{"serverside-applied"}, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-")
	expect(t, admin(t, "GET", "/apis/apply.example.com/v1/namespaces/"+ns+"/widgets/w", nil), 200, `"size":"three"`, `"manager":"other"`)
}

// A custom resource's keyed list (x-kubernetes-list-type: map) merges by
// key: two managers each apply their own entry and both are kept; its
// atomic map is replaced whole by its owner. The OpenAPI document serves
// the markers.
func TestApplyCustomResourceListMap(t *testing.T) {
	ns := newNamespace(t)
	r := admin(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", listMapCRD, "Content-Type", "application/yaml")
	if r.code != 201 && r.code != 409 {
		t.Fatalf("create CRD: %s", r)
	}
	path := "/apis/apply.example.com/v1/namespaces/" + ns + "/widgets/lm"
	widget := func(port string) string {
		return `{"apiVersion":"apply.example.com/v1","kind":"Widget","metadata":{"name":"lm"},"spec":{"ports":[` + port + `]}}`
	}
	expect(t, admin(t, "PATCH", path+"?fieldManager=a", widget(`{"name":"http","port":80}`), "Content-Type", applyPatchType), 201)
	expect(t, admin(t, "PATCH", path+"?fieldManager=b", widget(`{"name":"https","port":443}`), "Content-Type", applyPatchType), 200,
		`{"name":"http","port":80}`, `{"name":"https","port":443}`)
	expect(t, admin(t, "PATCH", path+"?fieldManager=b", widget(`{"name":"http","port":81}`), "Content-Type", applyPatchType), 409,
		`.spec.ports[name=\"http\"].port`, `conflict with \"a\"`)
	expect(t, admin(t, "PATCH", path+"?fieldManager=a", `{"apiVersion":"apply.example.com/v1","kind":"Widget","metadata":{"name":"lm"},"spec":{"selector":{"x":"1","y":"2"}}}`,
		"Content-Type", applyPatchType), 200, `"selector":{"x":"1","y":"2"}`, `{"name":"https","port":443}`)
	r = admin(t, "PATCH", path+"?fieldManager=a", `{"apiVersion":"apply.example.com/v1","kind":"Widget","metadata":{"name":"lm"},"spec":{"selector":{"x":"1"}}}`,
		"Content-Type", applyPatchType)
	expect(t, r, 200, `"selector":{"x":"1"}`)

	expect(t, admin(t, "GET", "/openapi/v3/apis/apply.example.com/v1", nil), 200, `"x-kubernetes-list-type":"map"`, `"x-kubernetes-list-map-keys":["name"]`)
	expect(t, admin(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
		strings.Replace(strings.Replace(listMapCRD, "widgets.apply", "gadgets.apply", 1), "{kind: Widget, plural: widgets, singular: widget}", "{kind: Gadget, plural: gadgets, singular: gadget}", 1)+
			"              bad: {type: string, x-kubernetes-list-type: map}\n", "Content-Type", "application/yaml"), 422, "x-kubernetes-list-type")
}

// The built-in kinds' OpenAPI carries Kubernetes' list markers, e.g.
// status.devices of v1 claims keyed by driver, device, pool, shareID.
func TestOpenAPIListMarkers(t *testing.T) {
	expect(t, admin(t, "GET", "/openapi/v3/apis/resource.k8s.io/v1", nil), 200,
		`"x-kubernetes-list-map-keys":["driver","device","pool","shareID"]`)
	expect(t, admin(t, "GET", "/openapi/v3/api/v1", nil), 200, `"x-kubernetes-list-map-keys":["name"]`)
	expect(t, admin(t, "GET", "/openapi/v3/apis/resource.k8s.io/v1alpha2", nil), 200, `"x-kubernetes-list-map-keys":["uid"]`)
}
