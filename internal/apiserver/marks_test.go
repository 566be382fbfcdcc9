package apiserver

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/apiserver/auth"
	resourcev1 "k8s.io/api/resource/v1"
)

// markWrites are the write paths a mark is checked on, as (method,
// content type, body) of a request that sets key to value in metadata's
// field (labels or annotations) of an object; value "" removes it.
func markWrites(t *testing.T, get func() []byte, field, key, value string) map[string][3]string {
	t.Helper()
	val := fmt.Sprintf("%q", value)
	if value == "" {
		val = "null"
	}
	op := fmt.Sprintf(`[{"op":"add","path":"/metadata/%s","value":{}},{"op":"add","path":"/metadata/%s/%s","value":%s}]`,
		field, field, jsonPointerEscape(key), val)
	if value == "" {
		op = fmt.Sprintf(`[{"op":"remove","path":"/metadata/%s/%s"}]`, field, jsonPointerEscape(key))
	}
	merge := fmt.Sprintf(`{"metadata":{%q:{%q:%s}}}`, field, key, val)
	writes := map[string][3]string{
		"PUT":             {"PUT", "application/json", string(withMeta(t, get(), field, key, value))},
		"merge patch":     {"PATCH", mergePatchType, merge},
		"strategic patch": {"PATCH", strategicPatchType, merge},
		"JSON patch":      {"PATCH", jsonPatchType, op},
	}
	// An applied configuration without the key leaves it to its owner,
	// so apply can only set it (with force, taking it from its owner).
	if value != "" {
		var cur struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace,omitempty"`
			} `json:"metadata"`
		}
		resp{body: get()}.into(t, &cur)
		applied := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q,"namespace":%q,%q:{%q:%s}}}`,
			cur.APIVersion, cur.Kind, cur.Metadata.Name, cur.Metadata.Namespace, field, key, val)
		writes["apply"] = [3]string{"PATCH", applyPatchType, applied}
	}
	return writes
}

func jsonPointerEscape(s string) string {
	return string(bytes.ReplaceAll(bytes.ReplaceAll([]byte(s), []byte("~"), []byte("~0")), []byte("/"), []byte("~1")))
}

// withMeta sets (or, for "", removes) key in metadata.field of the JSON
// object obj.
func withMeta(t *testing.T, obj []byte, field, key, value string) []byte {
	t.Helper()
	var m map[string]any
	resp{body: obj}.into(t, &m)
	md := m["metadata"].(map[string]any)
	f, _ := md[field].(map[string]any)
	if f == nil {
		f = map[string]any{}
	}
	if value == "" {
		delete(f, key)
	} else {
		f[key] = value
	}
	md[field] = f
	return mustJSON(t, m)
}

// refusedEverywhere checks that every write path of token setting key to
// value (server-side apply with force included) is refused with 403
// naming mark and that the stored object is unchanged.
func refusedEverywhere(t *testing.T, token, path, field, key, value, mark string) {
	t.Helper()
	before := admin(t, "GET", path, nil)
	expect(t, before, 200)
	get := func() []byte { return admin(t, "GET", path, nil).body }
	for name, w := range markWrites(t, get, field, key, value) {
		p := path
		if w[1] == applyPatchType {
			p += "?fieldManager=marks-test&force=true"
		}
		r := call(t, token, w[0], p, w[2], "Content-Type", w[1])
		if r.code != 403 || !bytes.Contains(r.body, []byte(mark)) {
			t.Errorf("%s by %s: got %s, want 403 naming %s", name, token, r, mark)
		}
	}
	if after := admin(t, "GET", path, nil); !bytes.Equal(after.body, before.body) {
		t.Errorf("refused writes changed %s:\nbefore %s\nafter  %s", path, before.body, after.body)
	}
}

// TestNamespaceAdminAccessLabelIsAdmins: a user may neither create a
// namespace labelled resource.kubernetes.io/admin-access nor add, change
// or remove the label by PUT or any patch, so a user cannot give their
// claims admin access to devices; an admin may.
func TestNamespaceAdminAccessLabelIsAdmins(t *testing.T) {
	label := auth.AdminAccessLabel
	name := newNamespace(t)
	path := "/api/v1/namespaces/" + name
	labelled := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s-u","labels":{%q:"true"}}}`, name, label)
	expect(t, call(t, "user", "POST", "/api/v1/namespaces", labelled), 403, label)
	expect(t, admin(t, "GET", path+"-u", nil), 404)

	refusedEverywhere(t, "user", path, "labels", label, "true", label)
	expect(t, call(t, "user", "PATCH", path, `{"metadata":{"labels":{"team":"a"}}}`, "Content-Type", mergePatchType), 200, `"team":"a"`)

	expect(t, admin(t, "PATCH", path, fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, label), "Content-Type", mergePatchType), 200, label)
	refusedEverywhere(t, "user", path, "labels", label, "false", label)
	refusedEverywhere(t, "user", path, "labels", label, "", label)
	// The label's holder may still change the namespace's other labels.
	expect(t, call(t, "user", "PATCH", path, `{"metadata":{"labels":{"team":"b"}}}`, "Content-Type", strategicPatchType), 200, `"team":"b"`, label)
	expect(t, admin(t, "PATCH", path, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, label), "Content-Type", mergePatchType), 200)
	var ns corev1.Namespace
	admin(t, "GET", path, nil).into(t, &ns)
	if _, ok := ns.Labels[label]; ok {
		t.Fatalf("admin's removal of %s not stored: %v", label, ns.Labels)
	}
	expect(t, admin(t, "POST", "/api/v1/namespaces", labelled), 201, label)
	expect(t, admin(t, "DELETE", path+"-u", nil), 202)
}

// TestPodCDIAnnotationsAreAdmins: a user's pod may not carry cdi.k8s.io/
// annotations (the node injects the devices they name, past every
// allocation); an admin's may.
func TestPodCDIAnnotationsAreAdmins(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	key := "cdi.k8s.io/gpu"
	withCDI := makePod("cdi").obj()
	withCDI.Annotations = map[string]string{key: "example.com/gpu=gpu0"}
	expect(t, call(t, "user", "POST", pods, mustJSON(t, withCDI)), 403, key)
	expect(t, admin(t, "GET", pods+"/cdi", nil), 404)

	expect(t, call(t, "user", "POST", pods, mustJSON(t, makePod("plain").obj())), 201)
	refusedEverywhere(t, "user", pods+"/plain", "annotations", key, "example.com/gpu=gpu0", key)

	expect(t, admin(t, "POST", pods, mustJSON(t, withCDI)), 201, key)
	refusedEverywhere(t, "user", pods+"/cdi", "annotations", key, "example.com/gpu=gpu1", key)
	refusedEverywhere(t, "user", pods+"/cdi", "annotations", key, "", key)
	expect(t, call(t, "user", "PATCH", pods+"/cdi", `{"metadata":{"annotations":{"note":"x"}}}`, "Content-Type", mergePatchType), 200, key, `"note":"x"`)
	expect(t, admin(t, "PATCH", pods+"/cdi", fmt.Sprintf(`{"metadata":{"annotations":{%q:"example.com/gpu=gpu1"}}}`, key), "Content-Type", mergePatchType), 200, "gpu=gpu1")
}

// TestNodeTaintsAreAdmins: a node may not register out of service, nor
// add, change or remove its Node's taints afterwards (the out-of-service
// taint among them); an admin may.
func TestNodeTaintsAreAdmins(t *testing.T) {
	const node = "marks-node"
	path := "/api/v1/nodes/" + node
	oos := makeNode(node, nil)
	oos.Spec.Taints = []corev1.Taint{{Key: auth.OutOfServiceTaint, Effect: corev1.TaintEffectNoExecute}}
	admin(t, "DELETE", path, nil)
	expect(t, call(t, "marknode", "POST", "/api/v1/nodes", mustJSON(t, oos)), 403, auth.OutOfServiceTaint)
	expect(t, admin(t, "GET", path, nil), 404)
	expect(t, call(t, "marknode", "POST", "/api/v1/nodes", mustJSON(t, makeNode(node, nil))), 201)
	t.Cleanup(func() { admin(t, "DELETE", path, nil) })

	taint := fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"effect":"NoExecute"}]}}`, auth.OutOfServiceTaint)
	before := admin(t, "GET", path, nil).body
	expect(t, call(t, "marknode", "PATCH", path, taint, "Content-Type", mergePatchType), 403, auth.OutOfServiceTaint)
	expect(t, call(t, "marknode", "PATCH", path, `[{"op":"add","path":"/spec/unschedulable","value":true}]`, "Content-Type", jsonPatchType), 403, "spec.unschedulable")
	if after := admin(t, "GET", path, nil).body; !bytes.Equal(before, after) {
		t.Fatalf("refused writes changed the Node:\nbefore %s\nafter  %s", before, after)
	}
	expect(t, admin(t, "PATCH", path, taint, "Content-Type", mergePatchType), 200, auth.OutOfServiceTaint)

	// The node's PUT of its Node with the taint kept (as its heartbeat
	// writes it) passes; dropping the taint does not.
	var n corev1.Node
	admin(t, "GET", path, nil).into(t, &n)
	n.Labels = map[string]string{"zone": "a"}
	r := call(t, "marknode", "PUT", path, mustJSON(t, &n))
	expect(t, r, 200, `"zone":"a"`, auth.OutOfServiceTaint)
	r.into(t, &n)
	before = admin(t, "GET", path, nil).body
	n.Spec.Taints = nil
	expect(t, call(t, "marknode", "PUT", path, mustJSON(t, &n)), 403, "spec.taints")
	expect(t, call(t, "marknode", "PATCH", path, `{"spec":{"taints":null}}`, "Content-Type", strategicPatchType), 403, "spec.taints")
	if after := admin(t, "GET", path, nil).body; !bytes.Equal(before, after) {
		t.Fatalf("refused writes changed the Node:\nbefore %s\nafter  %s", before, after)
	}
	expect(t, admin(t, "PATCH", path, `{"spec":{"taints":null}}`, "Content-Type", mergePatchType), 200)
}

// TestNamespaceFinalizersKeptOnUpdate: as in Kubernetes, a PUT or patch of
// a namespace keeps its spec.finalizers (only namespaces/NAME/finalize
// changes them), so a user cannot make a DELETE remove the namespace at
// once and leave its pods behind.
func TestNamespaceFinalizersKeptOnUpdate(t *testing.T) {
	name := newNamespace(t)
	path := "/api/v1/namespaces/" + name
	var ns corev1.Namespace
	admin(t, "GET", path, nil).into(t, &ns)
	ns.Spec.Finalizers = nil
	ns.Labels = map[string]string{"team": "a"}
	expect(t, call(t, "user", "PUT", path, mustJSON(t, &ns)), 200, `"team":"a"`, `"finalizers":["kubernetes"]`)
	expect(t, call(t, "user", "PATCH", path, `{"spec":{"finalizers":null}}`, "Content-Type", mergePatchType), 200, `"finalizers":["kubernetes"]`)
	expect(t, call(t, "user", "PATCH", path, `[{"op":"remove","path":"/spec/finalizers"}]`, "Content-Type", jsonPatchType), 200, `"finalizers":["kubernetes"]`)

	pods := path + "/pods"
	expect(t, call(t, "user", "POST", pods, mustJSON(t, makePod("stays").obj())), 201)
	expect(t, call(t, "user", "DELETE", path, nil), 202, "Terminating")
	expect(t, admin(t, "GET", path, nil), 200, "Terminating")
	expect(t, admin(t, "GET", pods+"/stays", nil), 200)
}

// TestStoredVersionAnnotationIsNeverStored: the view mark is the API
// server's alone; a user's create or patch carrying it stores the claim
// without it, so no stored claim passes for a view (which components
// skip).
func TestStoredVersionAnnotationIsNeverStored(t *testing.T) {
	ns := newNamespace(t)
	mark := resourcev1alpha2.StoredVersionAnnotation
	claim := v1Claim("marked")
	claim.Annotations = map[string]string{mark: "resource.k8s.io/v1alpha2"}
	expect(t, call(t, "user", "POST", path1(ns, "resourceclaims"), claim), 201)
	expect(t, call(t, "user", "PATCH", path1(ns, "resourceclaims")+"/marked", fmt.Sprintf(`{"metadata":{"annotations":{%q:"resource.k8s.io/v1alpha2"}}}`, mark),
		"Content-Type", mergePatchType), 200)
	var stored resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/marked", nil).into(t, &stored)
	if _, ok := stored.Annotations[mark]; ok {
		t.Fatalf("stored claim carries %s: %v", mark, stored.Annotations)
	}
}
