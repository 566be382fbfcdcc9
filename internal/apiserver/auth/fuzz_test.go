package auth

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

var fuzzRoles = []Role{RoleAdmin, RoleUser, RoleScheduler, RoleControllerManager, RoleNode, RoleDriver, RoleNodeDriver, "", "root"}

// objectFor decodes a fuzzed object for the resource: a typed object for
// the kinds rules inspect, unstructured otherwise, nil when empty.
func objectFor(resource string, data []byte) runtime.Object {
	if len(data) == 0 {
		return nil
	}
	var obj runtime.Object
	switch resource {
	case "pods":
		obj = &corev1.Pod{}
	case "nodes":
		obj = &corev1.Node{}
	case "resourceclaims":
		obj = &resourcev1alpha2.ResourceClaim{}
	case "noderesourceslices":
		obj = &resourcev1alpha2.NodeResourceSlice{}
	case "resourceclaimparameters":
		obj = &resourcev1alpha2.ResourceClaimParameters{}
	case "resourceclassparameters":
		obj = &resourcev1alpha2.ResourceClassParameters{}
	default:
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil
		}
		return u
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil
	}
	return obj
}

// FuzzAuthorize: whatever the request, Authorize does not panic, gives a
// reason, lets admins do everything, refuses anonymous and unknown roles,
// and lets no other role use a verb it does not know.
func FuzzAuthorize(f *testing.F) {
	f.Add(uint8(1), "create", "", "pods", "", "default", "p", "n1", []byte(`{"metadata":{"name":"p"},"spec":{"nodeName":"n1"}}`), []byte(nil))
	f.Add(uint8(4), "delete", "", "pods", "", "default", "p1", "n1", []byte(nil), []byte(`{"metadata":{"name":"p1"},"spec":{"nodeName":"n2"}}`))
	f.Add(uint8(4), "update", "resource.k8s.io", "noderesourceslices", "", "", "s", "n1",
		[]byte(`{"spec":{"nodeName":"n1"}}`), []byte(`{"spec":{"nodeName":"n2"}}`))
	f.Add(uint8(5), "update", "resource.k8s.io", "resourceclaims", "status", "default", "gpu-claim", "gpu.example.com", []byte(`{}`), []byte(nil))
	f.Add(uint8(2), "update", "resource.k8s.io", "resourceclaims", "", "default", "gpu-claim", "scheduler",
		[]byte(`{"metadata":{"finalizers":["x"]}}`), []byte(`{"metadata":{}}`))
	f.Add(uint8(1), "patch", "resource.k8s.io", "resourceclaims", "", "default", "c", "alice",
		[]byte(`{"metadata":{"finalizers":["semantic.dra.k8s.io/delete-protection"]}}`), []byte(`{}`))
	f.Add(uint8(3), "patch", "", "configmaps", "", "default", "c", "controller-manager", []byte(`{"metadata":{"ownerReferences":[]}}`), []byte(`{}`))
	f.Add(uint8(5), "create", "resource.k8s.io", "resourceclaimparameters", "", "default", "p", "gpu.example.com",
		[]byte(`{"generatedFrom":{"apiGroup":"gpu.example.com"}}`), []byte(nil))
	f.Add(uint8(1), "escalate", "cards.example.com", "cards", "scale", "", "", "alice", []byte(`[]`), []byte(`null`))
	f.Add(uint8(6), "list", "resource.k8s.io", "resourceslices", "", "", "", "gpu.example.com@n1", []byte(nil), []byte(nil))
	f.Add(uint8(6), "get", "resource.k8s.io", "resourceclaims", "", "default", "nd-own", "gpu.example.com@n1", []byte(nil), []byte(nil))
	lk := testLookup()
	f.Fuzz(func(t *testing.T, role uint8, verb, group, resource, sub, ns, name, user string, obj, old []byte) {
		a := Attributes{
			User: User{Name: user, Role: fuzzRoles[int(role)%len(fuzzRoles)]}, Verb: verb,
			APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, Namespaced: ns != "",
			Object: objectFor(resource, obj), OldObject: objectFor(resource, old),
		}
		d := Authorize(context.Background(), a, lk)
		if d.Reason == "" {
			t.Fatalf("no reason for %+v", a)
		}
		switch {
		case a.User.Name == "" && d.Allowed:
			t.Fatalf("anonymous request allowed: %+v", a)
		case a.User.Name != "" && a.User.Role == RoleAdmin && !d.Allowed:
			t.Fatalf("admin denied: %+v: %s", a, d.Reason)
		case d.Allowed && !slices.Contains(fuzzRoles[:7], a.User.Role):
			t.Fatalf("unknown role %q allowed: %s", a.User.Role, d.Reason)
		case d.Allowed && a.User.Role != RoleAdmin && !slices.Contains(append(readVerbs, writeVerbs...), verb):
			t.Fatalf("unknown verb %q allowed for %s: %s", verb, a.User, d.Reason)
		case d.Allowed && a.User.Role == RoleNode && !isRead(verb) && a.is(grPods, "") && verb != "delete":
			t.Fatalf("node wrote a pod's main resource: %+v", a)
		}
	})
}

// FuzzNodeDriverName: validateIdentity accepts a node-driver name exactly
// when it is DRIVER@NODE with one "@" and both halves DNS subdomains, and
// Driver() and Node() give the halves back.
func FuzzNodeDriverName(f *testing.F) {
	for _, name := range []string{"gpu.example.com@n1", "gpu.example.com@n1@n2", "@n1", "gpu.example.com@", "@",
		"GPU.example.com@n1", "gpu.example.com@Node-1", "gpu.example.com", "gpu,x@n1", "gpu.example.com@n 1", ""} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := validateIdentity(name, RoleNodeDriver)
		driver, node, ok := strings.Cut(name, "@")
		want := ok && !strings.Contains(node, "@") &&
			len(validation.IsDNS1123Subdomain(driver)) == 0 && len(validation.IsDNS1123Subdomain(node)) == 0
		if (err == nil) != want {
			t.Fatalf("validateIdentity(%q, node-driver) = %v, want valid %v", name, err, want)
		}
		if err != nil {
			return
		}
		if strings.ContainsAny(name, ", \n") {
			t.Fatalf("valid name %q cannot be written to the tokens file", name)
		}
		u := User{Name: name, Role: RoleNodeDriver}
		if u.Driver()+"@"+u.Node() != name || u.Driver() == "" || u.Node() == "" {
			t.Fatalf("%q: Driver() %q, Node() %q", name, u.Driver(), u.Node())
		}
	})
}
