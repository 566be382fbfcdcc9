package apiserver

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/apiserver/auth"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A user copies another pod's structured allocation into the body of a new
// claim: the create must store no status, so the forged allocation (and
// reservation) never reaches the scheduler or a node.
func TestCreateDropsForgedClaimStatus(t *testing.T) {
	ns := newNamespace(t)
	claims := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	forged := makeClaim("forged", "gpu.example.com")
	forged.Status = resourcev1alpha2.ResourceClaimStatus{
		DriverName:  "gpu.example.com",
		Allocation:  structuredAlloc("n1", "gpu.example.com", "gpu-0"),
		ReservedFor: []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "mine", UID: "1234"}},
	}
	expect(t, call(t, "user", "POST", claims, mustJSON(t, forged)), 201)
	var got resourcev1alpha2.ResourceClaim
	admin(t, "GET", claims+"/forged", nil).into(t, &got)
	if !reflect.DeepEqual(got.Status, resourcev1alpha2.ResourceClaimStatus{}) {
		t.Fatalf("a user's create stored the claim status %+v", got.Status)
	}
	// The same holds for every role: even an admin allocates through
	// pods/binding, and a driver through resourceclaims/status.
	forged.Name = "forged-by-admin"
	expect(t, admin(t, "POST", claims, mustJSON(t, forged)), 201)
	admin(t, "GET", claims+"/forged-by-admin", nil).into(t, &got)
	if got.Status.Allocation != nil || len(got.Status.ReservedFor) > 0 {
		t.Fatalf("an admin's create stored the claim status %+v", got.Status)
	}
}

// Every kind with a status subresource drops the status of a create,
// except Node, whose agent registers it with its status.
func TestCreateStatusPerKind(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name, token, path, body string
		// stored is a substring of the stored object that must (keep) or
		// must not (drop) appear.
		stored string
		keep   bool
	}{
		{"pod", "user", "/api/v1/namespaces/" + ns + "/pods",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"busybox"}]},
			  "status":{"phase":"Running","podIP":"10.9.9.9"}}`, "10.9.9.9", false},
		{"namespace", "admin", "/api/v1/namespaces",
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `-st"},"status":{"phase":"Terminating"}}`, "Terminating", false},
		{"resourcequota", "admin", "/api/v1/namespaces/" + ns + "/resourcequotas",
			`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"count/resourceclaims.resource.k8s.io":"5"}},
			  "status":{"hard":{"count/resourceclaims.resource.k8s.io":"500"},"used":{"count/resourceclaims.resource.k8s.io":"-7"}}}`, `"-7"`, false},
		{"podschedulingcontext", "admin", "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/podschedulingcontexts",
			`{"apiVersion":"resource.k8s.io/v1alpha2","kind":"PodSchedulingContext","metadata":{"name":"p"},"spec":{"selectedNode":"n1"},
			  "status":{"resourceClaims":[{"name":"gpu","unsuitableNodes":["forged-node"]}]}}`, "forged-node", false},
		{"custom resource", "user", "/apis/status.example.com/v1/namespaces/" + ns + "/widgets",
			`{"apiVersion":"status.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1},"status":{"ready":"forged"}}`, "forged", false},
		{"customresourcedefinition", "admin", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
			strings.Replace(widgetCRD("things", "Thing"), `"metadata":{`, `"status":{"storedVersions":["v9"]},"metadata":{`, 1), `"v9"`, false},
		{"node", "admin", "/api/v1/nodes",
			`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1-status"},"status":{"capacity":{"cpu":"3"}}}`, `"cpu":"3"`, true},
	}
	expect(t, admin(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widgetCRD("widgets", "Widget")), 201)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, c.token, "POST", c.path, c.body)
			expect(t, r, 201)
			if got := strings.Contains(string(r.body), c.stored); got != c.keep {
				t.Fatalf("create answered %s: status kept=%v, want %v", r.body, got, c.keep)
			}
		})
	}
}

// widgetCRD is a namespaced CRD in group status.example.com with a status
// subresource.
func widgetCRD(plural, kind string) string {
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"` + plural + `.status.example.com"},
 "spec":{"group":"status.example.com","scope":"Namespaced",
  "names":{"kind":"` + kind + `","plural":"` + plural + `"},
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
     "spec":{"type":"object","properties":{"size":{"type":"integer"}}},
     "status":{"type":"object","properties":{"ready":{"type":"string"}}}}}}}]}}`
}

// Every served kind with a status subresource has made the drop-or-keep
// choice, and a kind added without one cannot be served. A typed kind whose
// object has a status must serve it as a subresource: otherwise a plain
// create or update would write it.
func TestEveryStatusKindChoosesOnCreate(t *testing.T) {
	kinds := builtinKinds()
	for _, k := range testAPI.reg.all() {
		if k.crd != nil {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		if err := checkKind(k); err != nil {
			t.Error(err)
		}
		if k.crd != nil {
			continue
		}
		if _, ok := reflect.TypeOf(k.newObj()).Elem().FieldByName("Status"); ok && !k.hasStatus {
			t.Errorf("%s has a status but no status subresource", k.gvk)
		}
		if k.hasStatus && k.onCreate == keepStatusOnCreate && k.gvk != corev1.SchemeGroupVersion.WithKind("Node") {
			t.Errorf("%s keeps the status of a create: only Node may", k.gvk)
		}
	}
	unchosen := &kind{gvk: schema.GroupVersionKind{Group: "x.example.com", Version: "v1", Kind: "New"}, hasStatus: true}
	if checkKind(unchosen) == nil {
		t.Fatal("a kind with a status subresource and no onCreate choice passed checkKind")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registry.add served a kind with a status subresource and no onCreate choice")
		}
	}()
	newRegistry().add(unchosen)
}

// Users write claims, but not the marks allot's components put on them:
// the delete-protection finalizer and the generated-claim annotation.
func TestUserMayNotForgeClaimMarks(t *testing.T) {
	ns := newNamespace(t)
	claims := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	withFinalizer := makeClaim("fin", "gpu.example.com")
	withFinalizer.Finalizers = []string{resourcev1alpha2.DeleteProtectionFinalizer}
	expect(t, call(t, "user", "POST", claims, mustJSON(t, withFinalizer)), 403, resourcev1alpha2.DeleteProtectionFinalizer)

	generated := makeClaim("gen", "gpu.example.com")
	generated.Annotations = map[string]string{resourcev1alpha2.PodClaimNameAnnotation: "gpu"}
	expect(t, call(t, "user", "POST", claims, mustJSON(t, generated)), 403, resourcev1alpha2.PodClaimNameAnnotation)

	// A protected claim stays protected: the user may change other
	// metadata, but not drop the finalizer.
	expect(t, admin(t, "POST", claims, mustJSON(t, withFinalizer)), 201)
	var stored resourcev1alpha2.ResourceClaim
	admin(t, "GET", claims+"/fin", nil).into(t, &stored)
	stored.Labels = map[string]string{"team": "a"}
	r := call(t, "user", "PUT", claims+"/fin", mustJSON(t, &stored))
	expect(t, r, 200)
	r.into(t, &stored)
	stored.Finalizers = nil
	expect(t, call(t, "user", "PUT", claims+"/fin", mustJSON(t, &stored)), 403, resourcev1alpha2.DeleteProtectionFinalizer)
	expect(t, call(t, "user", "PATCH", claims+"/fin", `{"metadata":{"finalizers":null}}`,
		"Content-Type", "application/merge-patch+json"), 403, resourcev1alpha2.DeleteProtectionFinalizer)
	expect(t, call(t, "user", "PATCH", claims+"/fin", `{"metadata":{"annotations":{"`+resourcev1alpha2.PodClaimNameAnnotation+`":"x"}}}`,
		"Content-Type", "application/merge-patch+json"), 403, resourcev1alpha2.PodClaimNameAnnotation)
}

// The authorizer's rules were written for auth.Resources: every built-in
// kind the server serves, with its subresources, must be there (and the
// role matrix test in package auth decides each role's verbs on it).
func TestServedKindsAreKnownToTheAuthorizer(t *testing.T) {
	known := map[string]auth.Resource{}
	for _, r := range auth.Resources {
		known[r.Group+"/"+r.Resource] = r
	}
	served := map[string]bool{}
	for _, k := range builtinKinds() {
		key := k.gvk.Group + "/" + k.resource
		served[key] = true
		r, ok := known[key]
		if !ok {
			t.Errorf("%s is served but not in auth.Resources: add it, and decide in the role matrix what each role may do with it", key)
			continue
		}
		if r.Namespaced != k.namespaced {
			t.Errorf("%s: auth.Resources says namespaced=%v, the server %v", key, r.Namespaced, k.namespaced)
		}
		var subs []string
		for _, sub := range []string{"status", "binding", "log", "finalize", "scale", "eviction", "proxy"} {
			if testAPI.knownSubresource(k, sub) {
				subs = append(subs, sub)
			}
		}
		if !slices.Equal(sortedCopy(subs), sortedCopy(r.Subresources)) {
			t.Errorf("%s: auth.Resources lists subresources %v, the server serves %v", key, r.Subresources, subs)
		}
	}
	for key := range known {
		if !served[key] {
			t.Errorf("auth.Resources lists %s, which the server does not serve", key)
		}
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// Without a token, or with one the server does not know (revoked), every
// verb on every kind is 401; only the public paths answer.
func TestAnonymousAndRevokedTokensOnEveryKind(t *testing.T) {
	for _, k := range builtinKinds() {
		base := "/api/" + k.gvk.Version
		if k.gvk.Group != "" {
			base = "/apis/" + k.gvk.Group + "/" + k.gvk.Version
		}
		coll := base + "/" + k.resource
		if k.namespaced {
			coll = base + "/namespaces/default/" + k.resource
		}
		for _, token := range []string{"", "revoked-token"} {
			for _, r := range []struct{ method, path string }{
				{"GET", coll}, {"GET", coll + "?watch=true"}, {"POST", coll}, {"GET", coll + "/x"},
				{"PUT", coll + "/x"}, {"PATCH", coll + "/x"}, {"DELETE", coll + "/x"}, {"DELETE", coll},
			} {
				if got := call(t, token, r.method, r.path, `{}`); got.code != 401 {
					t.Errorf("token %q: %s %s = %d, want 401", token, r.method, r.path, got.code)
				}
			}
		}
	}
	expect(t, call(t, "revoked-token", "GET", "/healthz", nil), 200)
}
