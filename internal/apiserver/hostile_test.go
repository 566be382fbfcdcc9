package apiserver

import (
	"fmt"
	"strings"
	"testing"
)

// Hostile bodies get a clear 4xx naming what is wrong, in an answer of
// bounded size, and leave nothing stored.
func TestHostileBodies(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	params := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaimparameters"
	pod := func(name, resources string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"c","image":"busybox","resources":` + resources + `}]}}`
	}
	paramsWith := func(name string, requests int, selector string) string {
		req := `{"driverName":"gpu.example.com","partitionable":{"required":[{"selector":` + fmt.Sprintf("%q", selector) + `}]}}`
		return `{"apiVersion":"resource.k8s.io/v1alpha2","kind":"ResourceClaimParameters","metadata":{"name":"` + name + `"},"requests":[` +
			strings.TrimSuffix(strings.Repeat(req+",", requests), ",") + `]}`
	}
	// A selector of 100 KB that would compile were it shorter, and one of
	// 9 KB (under the length limit) with a syntax error at its end.
	longSelector := strings.Repeat(`strings["model"] == "a" || `, 4000) + "true"
	brokenSelector := strings.Repeat(`strings["model"] == "a" || `, 300) + "&&"
	nested := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	aliasBomb := `apiVersion: v1
kind: Pod
metadata:
  name: bomb
  annotations:
    a: &a ["x","x","x","x","x","x","x","x","x","x"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]
spec:
  containers: [{name: c, image: busybox}]
`
	for _, tc := range []struct {
		name, path, body string
		code             int
		contains         []string
		// stored is the object that must not exist afterwards.
		stored string
	}{
		{name: "cpu 1e400", path: pods, body: pod("cpu", `{"requests":{"cpu":"1e400"}}`), code: 422,
			contains: []string{"spec.containers[0].resources.requests[cpu]", "millicores"}, stored: pods + "/cpu"},
		{name: "cpu huge Ti", path: pods, body: pod("cputi", `{"limits":{"cpu":"99999999999999999999999Ti"}}`), code: 422,
			contains: []string{"spec.containers[0].resources.limits[cpu]"}, stored: pods + "/cputi"},
		{name: "memory 1e400", path: pods, body: pod("mem", `{"limits":{"memory":"1e400"}}`), code: 422,
			contains: []string{"spec.containers[0].resources.limits[memory]", "2^63-1"}, stored: pods + "/mem"},
		{name: "node allocatable 1e400", path: "/api/v1/nodes",
			body: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"huge-node"},"status":{"allocatable":{"cpu":"1e400"}}}`, code: 422,
			contains: []string{"status.allocatable[cpu]"}, stored: "/api/v1/nodes/huge-node"},
		{name: "quota 1e400", path: "/api/v1/namespaces/" + ns + "/resourcequotas",
			body: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"requests.memory":"1e400"}}}`, code: 422,
			contains: []string{"spec.hard[requests.memory]"}, stored: "/api/v1/namespaces/" + ns + "/resourcequotas/q"},
		{name: "100 KB selector", path: params, body: paramsWith("long", 1, longSelector), code: 422,
			contains: []string{"requests[0].partitionable.required[0].selector", "more than the limit of 10240"}, stored: params + "/long"},
		{name: "selector syntax error", path: params, body: paramsWith("broken", 1, brokenSelector), code: 422,
			contains: []string{"requests[0].partitionable.required[0].selector", "does not compile", "1:"}, stored: params + "/broken"},
		{name: "too many requests", path: params, body: paramsWith("many", 1000, "true"), code: 422,
			contains: []string{"requests: Too many: 1000: must have at most 32 items"}, stored: params + "/many"},
		{name: "too many pod claims", path: pods, body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"claims"},"spec":{"containers":[{"name":"c","image":"busybox"}],"resourceClaims":[` +
			strings.TrimSuffix(strings.Repeat(`{"name":"x","resourceClaimName":"x"},`, 33), ",") + `]}}`, code: 422,
			contains: []string{"spec.resourceClaims: Too many: 33"}, stored: pods + "/claims"},
		{name: "deep nesting", path: pods, body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"deep","annotations":` + nested + `}}`, code: 400,
			contains: []string{"depth"}, stored: pods + "/deep"},
		{name: "YAML alias bomb", path: pods, body: aliasBomb, code: 400, contains: []string{"alias"}, stored: pods + "/bomb"},
		{name: "10 MB body", path: pods, body: pod("big", `{}`)[:40] + strings.Repeat(" ", 10<<20) + pod("big", `{}`)[40:], code: 413,
			contains: []string{"exceeds the limit"}, stored: pods + "/big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, "admin", "POST", tc.path, tc.body, "Content-Type", "application/yaml")
			expect(t, r, tc.code, tc.contains...)
			if len(r.body) > 4<<10 {
				t.Errorf("answer of %d bytes, want at most 4 KiB: %.300s...", len(r.body), r.body)
			}
			expect(t, admin(t, "GET", tc.stored, nil), 404)
		})
	}
}
