package apiserver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
)

// unchanged fails unless a GET of path answers exactly before: same
// content, same resourceVersion and generation.
func unchanged(t *testing.T, path string, before resp, after string) {
	t.Helper()
	if now := admin(t, "GET", path, nil); now.code != before.code || !bytes.Equal(now.body, before.body) {
		t.Fatalf("after %s, GET %s = %s, want it unchanged: %s", after, path, now, before)
	}
}

// quietUntil fails unless the first event of a watch is the one marker
// names: a later real write's, so nothing came before it.
func quietUntil(t *testing.T, ch <-chan watchEvent, typ, marker string) {
	t.Helper()
	if ev := nextEvent(t, ch); ev.Type != typ || !contains(ev.Object, marker) {
		t.Fatalf("watch saw %s %s before the real write (want %s with %s)", ev.Type, ev.Object, typ, marker)
	}
}

// Every update path honours dryRun=All: the answer shows the change, the
// object stays as it was (content, resourceVersion, generation) and a
// watch sees nothing.
func TestDryRunUpdatesPatchesAndDeletesWriteNothing(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	var p corev1.Pod
	admin(t, "POST", pods, makePod("dry").label("a", "1").obj()).into(t, &p)
	var other corev1.Pod
	admin(t, "POST", pods, makePod("other").label("a", "1").obj()).into(t, &other)
	before := admin(t, "GET", pods+"/dry", nil)
	others := admin(t, "GET", pods+"/other", nil)
	ch := startWatch(t, pods+"?watch=true&resourceVersion="+other.ResourceVersion)

	relabeled := p.DeepCopy()
	relabeled.Labels["a"] = "put"
	withStatus := p.DeepCopy()
	withStatus.Status.Message = "put-status"
	rv := `"resourceVersion":"` + p.ResourceVersion + `"`
	for _, c := range []struct {
		name, method, path, ct string
		body                   any
		code                   int
		want                   []string
	}{
		{"PUT", "PUT", "/dry", "application/json", relabeled, 200, []string{`"a":"put"`, rv}},
		{"merge patch", "PATCH", "/dry", mergePatchType, `{"metadata":{"labels":{"a":"merge"}}}`, 200, []string{`"a":"merge"`, rv}},
		{"JSON patch", "PATCH", "/dry", jsonPatchType, `[{"op":"replace","path":"/metadata/labels/a","value":"json"}]`, 200, []string{`"a":"json"`, rv}},
		{"strategic merge patch", "PATCH", "/dry", strategicPatchType, `{"metadata":{"labels":{"a":"smp"}}}`, 200, []string{`"a":"smp"`, rv}},
		{"PUT status", "PUT", "/dry/status", "application/json", withStatus, 200, []string{`"message":"put-status"`, rv}},
		{"merge patch status", "PATCH", "/dry/status", mergePatchType, `{"status":{"message":"merge-status"}}`, 200, []string{`"message":"merge-status"`, rv}},
		{"JSON patch status", "PATCH", "/dry/status", jsonPatchType, `[{"op":"add","path":"/status/message","value":"json-status"}]`, 200, []string{`"message":"json-status"`, rv}},
		{"strategic merge patch status", "PATCH", "/dry/status", strategicPatchType, `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, 200, []string{`"type":"Ready"`, rv}},
		{"DELETE", "DELETE", "/dry", "application/json", nil, 200, []string{"Success"}},
		{"DELETE, dryRun in DeleteOptions", "DELETE", "/dry", "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}`, 200, []string{"Success"}},
		{"DELETE with a finalizer added", "DELETE", "/dry", "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground"}`, 202, []string{`"deletionTimestamp"`, `"foregroundDeletion"`}},
		{"deletecollection", "DELETE", "", "application/json", nil, 200, []string{"Success"}},
	} {
		path := pods + c.path
		if b, _ := c.body.(string); !strings.Contains(b, `"dryRun"`) {
			path += "?dryRun=All"
		}
		expect(t, admin(t, c.method, path, c.body, "Content-Type", c.ct), c.code, c.want...)
		unchanged(t, pods+"/dry", before, c.name)
		unchanged(t, pods+"/other", others, c.name)
	}
	// A real write: the watch's first event.
	expect(t, admin(t, "PATCH", pods+"/dry", `{"metadata":{"labels":{"marker":"real"}}}`, "Content-Type", mergePatchType), 200)
	quietUntil(t, ch, "MODIFIED", `"marker":"real"`)
}

// A dry run is refused for every reason the write would be: validation,
// authorization, resourceVersion preconditions, an existing name, a
// missing namespace, and answers what the write would.
func TestDryRunRunsTheWritesChecks(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	var p corev1.Pod
	admin(t, "POST", pods, makePod("v").obj()).into(t, &p)
	before := admin(t, "GET", pods+"/v", nil)

	expect(t, admin(t, "PATCH", pods+"/v?dryRun=All", `{"spec":{"containers":[{"name":"c","image":"other"}]}}`, "Content-Type", mergePatchType), 422, "spec")
	invalid := p.DeepCopy()
	invalid.Spec.Containers = nil
	expect(t, admin(t, "PUT", pods+"/v?dryRun=All", invalid), 422)
	expect(t, admin(t, "POST", pods+"?dryRun=All", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nocontainers"},"spec":{}}`), 422)
	expect(t, call(t, "user", "PATCH", pods+"/v/status?dryRun=All", `{"status":{"message":"m"}}`, "Content-Type", mergePatchType), 403)
	stale := p.DeepCopy()
	stale.ResourceVersion = "1"
	stale.Labels = map[string]string{"x": "y"}
	expect(t, admin(t, "PUT", pods+"/v?dryRun=All", stale), 409)
	expect(t, admin(t, "PATCH", pods+"/v?dryRun=All", `{"metadata":{"resourceVersion":"1"}}`, "Content-Type", mergePatchType), 409)
	expect(t, admin(t, "DELETE", pods+"/v?dryRun=All", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`), 409)
	expect(t, admin(t, "POST", pods+"?dryRun=All", makePod("v").obj()), 409, "already exists")
	expect(t, admin(t, "POST", "/api/v1/namespaces/no-such-"+ns+"/pods?dryRun=All", makePod("x").obj()), 404)
	huge := `{"status":{"message":"` + strings.Repeat("x", 2<<20) + `"}}` // over etcd's value limit
	expect(t, admin(t, "PATCH", pods+"/v/status?dryRun=All", huge, "Content-Type", mergePatchType), 413)
	expect(t, admin(t, "PATCH", pods+"/v/status", huge, "Content-Type", mergePatchType), 413)
	unchanged(t, pods+"/v", before, "refused dry runs")

	// A create: the object with its defaults and a uid, but no
	// resourceVersion; nothing stored.
	r := admin(t, "POST", pods+"?dryRun=All", makePod("new").obj())
	expect(t, r, 201, `"name":"new"`, `"uid"`, `"generation":1`)
	if contains(r.body, `"resourceVersion"`) {
		t.Fatalf("a dry-run create answered a resourceVersion: %s", r.body)
	}
	expect(t, admin(t, "GET", pods+"/new", nil), 404)
	r = admin(t, "POST", pods+"?dryRun=All", `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"gen-"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	expect(t, r, 201, `"name":"gen-`)
	var gen corev1.Pod
	r.into(t, &gen)
	expect(t, admin(t, "GET", pods+"/"+gen.Name, nil), 404)
}

// A dry-run create is checked against the quota and charges nothing;
// neither does a dry-run update or delete release or charge.
func TestDryRunChargesNoQuota(t *testing.T) {
	ns := newNamespace(t)
	claims := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	quotas := "/api/v1/namespaces/" + ns + "/resourcequotas"
	expect(t, admin(t, "POST", quotas, `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{
		"count/resourceclaims.resource.k8s.io":"4","gpu.resourceclass.resource.k8s.io/resourceclaims":"1"}}}`), 201)
	used := func() int64 {
		t.Helper()
		var q corev1.ResourceQuota
		admin(t, "GET", quotas+"/q", nil).into(t, &q)
		u := q.Status.Used["gpu.resourceclass.resource.k8s.io/resourceclaims"]
		return u.Value()
	}
	quotaBefore := admin(t, "GET", quotas+"/q", nil)
	expect(t, admin(t, "POST", claims+"?dryRun=All", makeClaim("c1", "gpu")), 201, `"name":"c1"`)
	expect(t, admin(t, "GET", claims+"/c1", nil), 404)
	unchanged(t, quotas+"/q", quotaBefore, "a dry-run create")

	expect(t, admin(t, "POST", claims, makeClaim("c1", "gpu")), 201)
	if u := used(); u != 1 {
		t.Fatalf("used = %d after one claim, want 1", u)
	}
	quotaBefore = admin(t, "GET", quotas+"/q", nil)
	claimBefore := admin(t, "GET", claims+"/c1", nil)
	// The quota is full: a dry run says so.
	expect(t, admin(t, "POST", claims+"?dryRun=All", makeClaim("c2", "gpu")), 403, "exceeded quota: q")
	expect(t, admin(t, "PATCH", claims+"/c1?dryRun=All", `{"metadata":{"labels":{"l":"v"}}}`, "Content-Type", mergePatchType), 200, `"l":"v"`)
	expect(t, admin(t, "DELETE", claims+"/c1?dryRun=All", nil), 200)
	unchanged(t, claims+"/c1", claimBefore, "dry-run writes of the claim")
	unchanged(t, quotas+"/q", quotaBefore, "dry-run writes of the claim")

	// A dry-run spec change answers the generation it would store.
	var q corev1.ResourceQuota
	quotaBefore.into(t, &q)
	q.Spec.Hard["gpu.resourceclass.resource.k8s.io/resourceclaims"] = q.Spec.Hard["count/resourceclaims.resource.k8s.io"]
	expect(t, admin(t, "PUT", quotas+"/q?dryRun=All", &q), 200, `"generation":2`, `"gpu.resourceclass.resource.k8s.io/resourceclaims":"4"`)
	unchanged(t, quotas+"/q", quotaBefore, "a dry-run quota update")
	expect(t, admin(t, "POST", claims, makeClaim("c2", "gpu")), 403, "exceeded quota: q")
}

// pods/binding honours dryRun=All: checked, not bound.
func TestDryRunBindingBindsNothing(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	ensureNode(t, "dry-node")
	var p corev1.Pod
	admin(t, "POST", pods, makePod("b").obj()).into(t, &p)
	before := admin(t, "GET", pods+"/b", nil)
	ch := startWatch(t, pods+"?watch=true&resourceVersion="+p.ResourceVersion)
	r := admin(t, "POST", pods+"/b/binding?dryRun=All", bindingWith(t, "dry-node", ""))
	expect(t, r, 201, "Success")
	if contains(r.body, `"resourceVersion"`) {
		t.Fatalf("a dry-run binding answered a resourceVersion: %s", r.body)
	}
	expect(t, admin(t, "POST", pods+"/b/binding?dryRun=All", bindingWith(t, "no-such-node", "")), 404)
	unchanged(t, pods+"/b", before, "a dry-run binding")
	expect(t, admin(t, "POST", pods+"/b/binding", bindingWith(t, "dry-node", "")), 201)
	quietUntil(t, ch, "MODIFIED", `"nodeName":"dry-node"`)
}

// A dry-run finalize of a terminating namespace does not delete it.
func TestDryRunFinalizeKeepsNamespace(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "DELETE", "/api/v1/namespaces/"+ns, nil), 202)
	before := admin(t, "GET", "/api/v1/namespaces/"+ns, nil)
	var n corev1.Namespace
	before.into(t, &n)
	n.Spec.Finalizers = nil
	expect(t, admin(t, "PUT", "/api/v1/namespaces/"+ns+"/finalize?dryRun=All", &n), 200, `"Terminating"`)
	unchanged(t, "/api/v1/namespaces/"+ns, before, "a dry-run finalize")
	expect(t, admin(t, "PUT", "/api/v1/namespaces/"+ns+"/finalize", &n), 200)
	expect(t, admin(t, "GET", "/api/v1/namespaces/"+ns, nil), 404)
}

// A dry-run update of a CRD serves nothing new.
func TestDryRunCRDServesNothing(t *testing.T) {
	ns := newNamespace(t)
	crds := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	expect(t, admin(t, "POST", crds, widgetCRD("dryrunwidgets", "DryRunWidget")), 201)
	t.Cleanup(func() { admin(t, "DELETE", crds+"/dryrunwidgets.status.example.com", nil) })
	before := admin(t, "GET", crds+"/dryrunwidgets.status.example.com", nil)
	v2 := `[{"op":"add","path":"/spec/versions/-","value":{"name":"v2","served":true,"storage":false,
		"schema":{"openAPIV3Schema":{"type":"object"}}}}]`
	expect(t, admin(t, "PATCH", crds+"/dryrunwidgets.status.example.com?dryRun=All", v2, "Content-Type", jsonPatchType), 200, `"name":"v2"`)
	unchanged(t, crds+"/dryrunwidgets.status.example.com", before, "a dry-run CRD patch")
	expect(t, admin(t, "GET", "/apis/status.example.com/v2/namespaces/"+ns+"/dryrunwidgets", nil), 404)
	expect(t, admin(t, "GET", "/apis/status.example.com/v1/namespaces/"+ns+"/dryrunwidgets", nil), 200)
	expect(t, admin(t, "POST", crds+"?dryRun=All", widgetCRD("dryrunonly", "DryRunOnly")), 201)
	expect(t, admin(t, "GET", crds+"/dryrunonly.status.example.com", nil), 404)
	expect(t, admin(t, "GET", "/apis/status.example.com/v1/namespaces/"+ns+"/dryrunonly", nil), 404)
}

// Any dryRun value but "All" is refused before anything is done, as
// kube-apiserver refuses it: 422, an invalid CreateOptions,
// UpdateOptions, PatchOptions or DeleteOptions naming the dryRun field
// and its supported value.
func TestDryRunRefusesUnknownValues(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	ensureNode(t, "dry-node")
	expect(t, admin(t, "POST", pods, makePod("bad").obj()), 201)
	before := admin(t, "GET", pods+"/bad", nil)
	for _, c := range []struct {
		method, path, ct, options string
		body                      any
	}{
		{"POST", "?dryRun=bogus", "application/json", "CreateOptions", makePod("bad2").obj()},
		{"POST", "?dryRun=", "application/json", "CreateOptions", makePod("bad2").obj()},
		{"POST", "?dryRun=all", "application/json", "CreateOptions", makePod("bad2").obj()},
		{"POST", "/bad/binding?dryRun=bogus", "application/json", "CreateOptions", bindingWith(t, "dry-node", "")},
		{"PUT", "/bad?dryRun=bogus", "application/json", "UpdateOptions", before.body},
		{"PUT", "/bad/status?dryRun=bogus", "application/json", "UpdateOptions", before.body},
		{"PATCH", "/bad?dryRun=bogus", mergePatchType, "PatchOptions", `{"metadata":{"labels":{"a":"b"}}}`},
		{"PATCH", "/bad?dryRun=All&dryRun=bogus", jsonPatchType, "PatchOptions", `[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`},
		{"PATCH", "/bad/status?dryRun=bogus", strategicPatchType, "PatchOptions", `{"status":{"message":"m"}}`},
		{"DELETE", "/bad?dryRun=bogus", "application/json", "DeleteOptions", nil},
		{"DELETE", "/bad", "application/json", "DeleteOptions", `{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["bogus"]}`},
		{"DELETE", "?dryRun=bogus", "application/json", "DeleteOptions", nil},
	} {
		r := admin(t, c.method, pods+c.path, c.body, "Content-Type", c.ct)
		expect(t, r, 422, c.options+`.meta.k8s.io \"\" is invalid: dryRun: Unsupported value`, `supported values: \"All\"`)
		unchanged(t, pods+"/bad", before, fmt.Sprintf("%s %s", c.method, c.path))
	}
	expect(t, admin(t, "GET", pods+"/bad2", nil), 404)
}
