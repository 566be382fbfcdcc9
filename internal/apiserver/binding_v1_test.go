package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// v1Alloc is a v1 allocation of one device of a node-local pool.
func v1Alloc(node, device string) *resourcev1.AllocationResult {
	return &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "gpu.example.com", Pool: node, Device: device}}},
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
}

// A claim stored as v1 is allocated and reserved through pods/binding,
// in the binding's one transaction with its fence, like a v1alpha2 claim;
// v1 claims are shared by several pods.
func TestBindingAllocatesV1Claims(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "bind-v1")
	ensureNode(t, "bind-v1-other")
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("shared")), 201)
	for _, p := range []string{"p1", "p2", "p3"} {
		expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod(p).claim("shared").obj()), 201)
	}
	bc := corev1.BindingResourceClaim{Name: "shared", Allocation: &runtime.RawExtension{Raw: mustJSON(t, v1Alloc("bind-v1", "gpu-0"))}}
	pods := "/api/v1/namespaces/" + ns + "/pods/"
	expect(t, admin(t, "POST", pods+"p1/binding", bindingWith(t, "bind-v1", "", bc)), 400, "allocationFences")
	bad := bc
	bad.Allocation = &runtime.RawExtension{Raw: []byte(`{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"bind-v1","device":"gpu-0","bogus":1}]}}`)}
	expect(t, admin(t, "POST", pods+"p1/binding", bindingWith(t, "bind-v1", currentRev(t), bad)), 400, "bogus")
	expect(t, admin(t, "POST", pods+"p1/binding", bindingWith(t, "bind-v1", currentRev(t), bc)), 201)

	var c resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/shared", nil).into(t, &c)
	if c.Status.Allocation == nil || c.Status.Allocation.Devices.Results[0].Device != "gpu-0" || len(c.Status.ReservedFor) != 1 ||
		c.Status.ReservedFor[0].Name != "p1" || !hasString(c.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer) {
		t.Fatalf("claim after the binding: %+v", c)
	}
	// Allocated already: a second allocation conflicts; a reservation joins.
	expect(t, admin(t, "POST", pods+"p2/binding", bindingWith(t, "bind-v1", currentRev(t), bc)), 409, "already allocated")
	expect(t, admin(t, "POST", pods+"p2/binding", bindingWith(t, "bind-v1", "", corev1.BindingResourceClaim{Name: "shared"})), 201)
	// Not on a node the allocation excludes.
	expect(t, admin(t, "POST", pods+"p3/binding", bindingWith(t, "bind-v1-other", "", corev1.BindingResourceClaim{Name: "shared"})), 409, "not available on node bind-v1-other")
	admin(t, "GET", path1(ns, "resourceclaims")+"/shared", nil).into(t, &c)
	if len(c.Status.ReservedFor) != 2 {
		t.Fatalf("reservedFor %+v", c.Status.ReservedFor)
	}
	// The v1alpha2 view shows the same allocation in its terms.
	var view resourcev1alpha2.ResourceClaim
	admin(t, "GET", path2(ns, "resourceclaims")+"/shared", nil).into(t, &view)
	if view.Status.DriverName != "gpu.example.com" || len(view.Status.ReservedFor) != 2 ||
		view.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID != "gpu-0" {
		t.Fatalf("v1alpha2 view: %+v", view.Status)
	}
}

// The fence of a v1 allocation is the (node, driver) fence of v1alpha2
// allocations, so allocations through both APIs are ordered; shared
// fences listed by the writer are checked too.
func TestBindingV1FenceIsShared(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "fence-v1")
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("old", "gpu")), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("new")), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("a").claim("old").obj()), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("b").claim("new").obj()), 201)
	seen := currentRev(t)
	pods := "/api/v1/namespaces/" + ns + "/pods/"
	expect(t, admin(t, "POST", pods+"a/binding", bindingWith(t, "fence-v1", seen, allocClaim(t, "old", "fence-v1", "gpu-0"))), 201)
	// b was decided at the same revision: the v1alpha2 binding moved the fence.
	bc := corev1.BindingResourceClaim{Name: "new", Allocation: &runtime.RawExtension{Raw: mustJSON(t, v1Alloc("fence-v1", "gpu-1"))}}
	expect(t, admin(t, "POST", pods+"b/binding", bindingWith(t, "fence-v1", seen, bc)), 409, "allocationrevisions/fence-v1/gpu.example.com")
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("net")), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("c").claim("net").obj()), 201)
	withShared := func(fence string, bc corev1.BindingResourceClaim) *corev1.Binding {
		b := bindingWith(t, "fence-v1", currentRev(t), bc)
		b.AllocationFences = append(b.AllocationFences, corev1.AllocationFence{NodeName: SharedFenceNode, DriverName: "gpu.example.com", Revision: fence})
		return b
	}
	seen = currentRev(t)
	expect(t, admin(t, "POST", pods+"b/binding", withShared(seen, bc)), 201)
	net := corev1.BindingResourceClaim{Name: "net", Allocation: &runtime.RawExtension{Raw: mustJSON(t, v1Alloc("fence-v1", "gpu-2"))}}
	expect(t, admin(t, "POST", pods+"c/binding", withShared(seen, net)), 409, "allocationrevisions/_shared/gpu.example.com")
	expect(t, admin(t, "POST", pods+"c/binding", withShared(currentRev(t), net)), 201)
}

// A claimsOnly binding allocates and reserves the claims under the fence
// and leaves the pod pending; the pod is bound later by a binding that
// only reserves. The fence still keeps a second allocation out, and a pod
// with a node (or no claims listed) is refused.
func TestBindingClaimsOnly(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "bind-co")
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("c")), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("d")), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("p").claim("c").obj()), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("q").claim("d").obj()), 201)
	pods := "/api/v1/namespaces/" + ns + "/pods/"
	seen := currentRev(t)
	bc := corev1.BindingResourceClaim{Name: "c", Allocation: &runtime.RawExtension{Raw: mustJSON(t, v1Alloc("bind-co", "gpu-0"))}}
	first := bindingWith(t, "bind-co", seen, bc)
	first.ClaimsOnly = true
	empty := bindingWith(t, "bind-co", seen)
	empty.ClaimsOnly = true
	expect(t, admin(t, "POST", pods+"p/binding", empty), 422, "resourceClaims")
	expect(t, admin(t, "POST", pods+"p/binding", first), 201)

	var c resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/c", nil).into(t, &c)
	if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Name != "p" {
		t.Fatalf("claim after claimsOnly: %+v", c.Status)
	}
	var pod corev1.Pod
	admin(t, "GET", pods+"p", nil).into(t, &pod)
	if pod.Spec.NodeName != "" {
		t.Fatalf("claimsOnly bound the pod to %q", pod.Spec.NodeName)
	}
	// The fence moved: q's allocation decided at the same revision fails.
	other := bindingWith(t, "bind-co", seen, corev1.BindingResourceClaim{Name: "d", Allocation: &runtime.RawExtension{Raw: mustJSON(t, v1Alloc("bind-co", "gpu-0"))}})
	other.ClaimsOnly = true
	expect(t, admin(t, "POST", pods+"q/binding", other), 409, "allocationrevisions/bind-co")
	// The second step: the claim is reserved already, the pod is bound.
	expect(t, admin(t, "POST", pods+"p/binding", bindingWith(t, "bind-co", "", corev1.BindingResourceClaim{Name: "c"})), 201)
	admin(t, "GET", pods+"p", nil).into(t, &pod)
	if pod.Spec.NodeName != "bind-co" {
		t.Fatalf("pod on %q after the second step", pod.Spec.NodeName)
	}
	again := bindingWith(t, "bind-co", "", corev1.BindingResourceClaim{Name: "c"})
	again.ClaimsOnly = true
	expect(t, admin(t, "POST", pods+"p/binding", again), 409, "claimsOnly is for a pod without a node")
}

// A binding reads each claim once, in the version it is stored in (no
// view, so a v1 claim is not converted to v1alpha2 and read again): from
// the watch cache at the binding's resourceVersion, else from etcd.
func TestReadClaimForBindingIsNative(t *testing.T) {
	ns := newNamespace(t)
	var v1c resourcev1.ResourceClaim
	admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("c1")).into(t, &v1c)
	var seed resourcev1alpha2.ResourceClaim
	admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("c2", "gpu")).into(t, &seed)
	ck := testAPI.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclaims"))
	for _, tc := range []struct {
		name, rv string
		fresh    bool
		want     string // the Go type read
	}{
		{"c1", v1c.ResourceVersion, false, "*v1.ResourceClaim"},
		{"c1", "", false, "*v1.ResourceClaim"},
		{"c1", v1c.ResourceVersion, true, "*v1.ResourceClaim"},
		{"c2", seed.ResourceVersion, false, "*v1alpha2.ResourceClaim"},
		{"c2", "1", false, "*v1alpha2.ResourceClaim"},
	} {
		ctx := context.Background()
		if tc.fresh {
			ctx = context.WithValue(ctx, freshKey{}, true)
		}
		// The cache may lag behind the create; a read at the binding's
		// resourceVersion from etcd answers the same.
		obj, err := testAPI.readClaimForBinding(ctx, ck, ns, corev1.BindingResourceClaim{Name: tc.name, ResourceVersion: tc.rv})
		if err != nil {
			t.Fatalf("%s at %q: %v", tc.name, tc.rv, err)
		}
		acc, _ := meta.Accessor(obj)
		if got := fmt.Sprintf("%T", obj); got != tc.want || resourcev1alpha2.IsView(acc) {
			t.Errorf("%s at %q: read %s (view %v), want %s in its own version", tc.name, tc.rv, got, resourcev1alpha2.IsView(acc), tc.want)
		}
		want := map[string]string{"c1": v1c.ResourceVersion, "c2": seed.ResourceVersion}[tc.name]
		if acc.GetResourceVersion() != want {
			t.Errorf("%s at %q: resourceVersion %s, want %s", tc.name, tc.rv, acc.GetResourceVersion(), want)
		}
	}
	_, err := testAPI.readClaimForBinding(context.Background(), ck, ns, corev1.BindingResourceClaim{Name: "absent"})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("absent claim: %v, want NotFound", err)
	}
}

// resourceconv.NodeSelectorFromKube, as the binding reads a v1
// allocation's node selector, reads it as its JSON form does, field by
// field.
func TestAllotNodeSelectorAsJSON(t *testing.T) {
	req := func(key string, op kcorev1.NodeSelectorOperator, values ...string) kcorev1.NodeSelectorRequirement {
		return kcorev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	for name, s := range map[string]*kcorev1.NodeSelector{
		"no terms":    {},
		"empty term":  {NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{}}},
		"node name":   {NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{req("metadata.name", kcorev1.NodeSelectorOpIn, "n1")}}}},
		"labels, two": {NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchExpressions: []kcorev1.NodeSelectorRequirement{req("rack", kcorev1.NodeSelectorOpIn, "a", "b"), req("gpu", kcorev1.NodeSelectorOpExists)}}, {MatchExpressions: []kcorev1.NodeSelectorRequirement{req("zone", kcorev1.NodeSelectorOpNotIn, "z")}, MatchFields: []kcorev1.NodeSelectorRequirement{req("metadata.name", kcorev1.NodeSelectorOpIn, "n2")}}}},
	} {
		var want corev1.NodeSelector
		if err := json.Unmarshal(mustJSON(t, s), &want); err != nil {
			t.Fatal(err)
		}
		got := resourceconv.NodeSelectorFromKube(s)
		if g, w := string(mustJSON(t, got)), string(mustJSON(t, &want)); g != w && !(name == "no terms" && g == `{"nodeSelectorTerms":[]}`) {
			t.Errorf("%s: %s, want %s", name, g, w)
		}
		for _, n := range []struct {
			name   string
			labels map[string]string
		}{{"n1", nil}, {"n2", map[string]string{"zone": "y"}}, {"n3", map[string]string{"rack": "b", "gpu": "x"}}, {"n4", map[string]string{"rack": "c", "gpu": "x"}}} {
			if g, w := got.Matches(n.name, n.labels), want.Matches(n.name, n.labels); g != w {
				t.Errorf("%s on %s: matches %v, want %v", name, n.name, g, w)
			}
		}
	}
}
