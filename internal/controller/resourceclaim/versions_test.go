package resourceclaim

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
	"allot.dev/allot/pkg/client"
)

// Claims and templates stored as resource.k8s.io/v1, handled through v1.

const v1Driver = "gpu.example.com"

func v1ClaimSpec() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"},
	}}}}
}

// createTemplateV1 writes a v1 template whose spec.metadata carries a
// label and an annotation, and returns it as the server stored it.
func (e *env) createTemplateV1(name string) *resourcev1.ResourceClaimTemplate {
	e.t.Helper()
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "test-v1"}, Annotations: map[string]string{"note": "from the v1 template"}},
			Spec:       v1ClaimSpec(),
		}}
	out, err := e.c.ResourceClaimTemplatesV1(e.ns).Create(e.ctx, tmpl)
	if err != nil {
		e.t.Fatalf("create v1 template: %v", err)
	}
	return out
}

// claimV1 reads a claim through v1; nil when it does not exist.
func (e *env) claimV1(name string) *resourcev1.ResourceClaim {
	e.t.Helper()
	c, err := e.c.ResourceClaimsV1(e.ns).Get(e.ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get v1 claim %s: %v", name, err)
	}
	return c
}

// bindV1 binds the pod to the node through pods/binding with a v1
// allocation of the claim (one device of the node's pool), as the
// scheduler does for v1 claims: the binding reserves the claim for the
// pod and adds the delete-protection finalizer.
func (e *env) bindV1(pod *corev1.Pod, node, claim string) {
	e.t.Helper()
	alloc := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: v1Driver, Pool: node, Device: "gpu-0",
	}}}}
	raw, err := json.Marshal(alloc)
	if err != nil {
		e.t.Fatal(err)
	}
	b := &corev1.Binding{
		Target:           corev1.ObjectReference{Kind: "Node", Name: node},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: claim, DriverName: v1Driver, Allocation: &runtime.RawExtension{Raw: raw}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: node, DriverName: v1Driver, Revision: pod.ResourceVersion}},
	}
	b.APIVersion, b.Kind = "v1", "Binding"
	if _, err := e.c.Bind(e.ctx, e.ns, pod.Name, b); err != nil {
		e.t.Fatalf("bind pod %s with a %s allocation of claim %s: %v", pod.Name, versionV1, claim, err)
	}
	c := e.claimV1(claim)
	if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 || !slices.Contains(c.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer) {
		e.t.Fatalf("binding did not allocate, reserve and protect the v1 claim: %+v %v", c.Status, c.Finalizers)
	}
}

func (e *env) createNode(name string) string {
	e.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name}}
	if _, err := e.c.Nodes().Create(e.ctx, node); err != nil {
		e.t.Fatalf("create node: %v", err)
	}
	return node.Name
}

func (e *env) releasedV1(name string) func() bool {
	return func() bool {
		c := e.claimV1(name)
		return c != nil && len(c.Status.ReservedFor) == 0 && c.Status.Allocation == nil && len(c.Finalizers) == 0
	}
}

// A pod's entry naming a v1 template gets a v1 claim: named by
// GeneratedClaimName, the pod as controlling owner, the entry's
// annotation, the template's labels, annotations and spec. It is recorded
// in the pod's status, and a restarted controller creates no second one.
func TestV1TemplateClaimCreatedAndRecorded(t *testing.T) {
	e := newEnv(t)
	tmpl := e.createTemplateV1("gpu-tmpl")
	_, stop := e.startController()
	pod := e.createPod(makePod("web").template("gpu", "gpu-tmpl").obj())
	e.eventually("the claim is recorded in the pod's status", func() bool { return e.recordedClaim("web", "gpu") != "" })
	name := e.recordedClaim("web", "gpu")
	if want := allocator.GeneratedClaimName(pod, "gpu"); name != want {
		t.Fatalf("claim name %q, want %q", name, want)
	}
	claim := e.claimV1(name)
	if claim == nil || resourcev1alpha2.IsView(claim) {
		t.Fatalf("claim %s is not stored as %s: %+v", name, versionV1, claim)
	}
	ref := metav1.GetControllerOf(claim)
	switch {
	case ref == nil || ref.UID != pod.UID || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion:
		t.Fatalf("claim's controller reference %+v, want the pod %s", ref, pod.UID)
	case claim.Annotations[resourcev1alpha2.PodClaimNameAnnotation] != "gpu" || claim.Annotations["note"] != "from the v1 template" || claim.Labels["app"] != "test-v1":
		t.Fatalf("claim's metadata not built from the template: %+v", claim.ObjectMeta)
	case !apiequality.Semantic.DeepEqual(claim.Spec, tmpl.Spec.Spec):
		t.Fatalf("claim's spec %+v, want the template's %+v", claim.Spec, tmpl.Spec.Spec)
	}
	// Through v1alpha2 it is a view of the v1 claim.
	view, err := e.c.ResourceClaims(e.ns).Get(e.ctx, name)
	if err != nil || view.Annotations[resourcev1alpha2.StoredVersionAnnotation] != versionV1 {
		t.Fatalf("v1alpha2 read of the claim: %v, annotations %v; want a view of a %s claim", err, view.Annotations, versionV1)
	}

	stop()
	e.startController()
	e.consistently("exactly one claim exists", time.Second, func() bool { return len(e.claims()) == 1 })
}

// One pod, one entry per template version: each claim is made in its
// template's version, both are recorded.
func TestMixedTemplateVersions(t *testing.T) {
	e := newEnv(t)
	e.createTemplate("alpha-tmpl")
	e.createTemplateV1("v1-tmpl")
	ctrl, _ := e.startController()
	pod := e.createPod(makePod("mixed").template("old", "alpha-tmpl").template("new", "v1-tmpl").obj())
	e.eventually("both claims are recorded", func() bool {
		return e.recordedClaim("mixed", "old") != "" && e.recordedClaim("mixed", "new") != ""
	})
	oldName, newName := e.recordedClaim("mixed", "old"), e.recordedClaim("mixed", "new")
	if oldName != allocator.GeneratedClaimName(pod, "old") || newName != allocator.GeneratedClaimName(pod, "new") {
		t.Fatalf("recorded %q and %q, want the generated names", oldName, newName)
	}
	old := e.claim(oldName)
	if old == nil || resourcev1alpha2.IsView(old) || old.Spec.ResourceClassName != "gpu" || !allocator.IsPodClaim(old, pod, "old") {
		t.Fatalf("the v1alpha2 template's claim: %+v", old)
	}
	v1 := e.claimV1(newName)
	if v1 == nil || resourcev1alpha2.IsView(v1) || len(v1.Spec.Devices.Requests) != 1 || !allocator.IsPodClaimV1(v1, pod, "new") {
		t.Fatalf("the v1 template's claim: %+v", v1)
	}
	// Each informer holds only the claims stored in its version.
	e.eventually("the caches hold both claims", func() bool {
		_, err1 := ctrl.claims.Lister().Get(e.ns, oldName)
		_, err2 := ctrl.claimsV1.Lister().Get(e.ns, newName)
		return err1 == nil && err2 == nil
	})
	if _, err := ctrl.claims.Lister().Get(e.ns, newName); !apierrors.IsNotFound(err) {
		t.Errorf("the v1alpha2 cache holds the v1 claim (err %v)", err)
	}
	if _, err := ctrl.claimsV1.Lister().Get(e.ns, oldName); !apierrors.IsNotFound(err) {
		t.Errorf("the v1 cache holds the v1alpha2 claim (err %v)", err)
	}
	e.consistently("no further claims", 500*time.Millisecond, func() bool { return len(e.claims()) == 2 })
}

// A v1 claim bound to a pod through pods/binding loses its reservation
// once the pod is gone, and with it its allocation and finalizer; then
// it can be deleted at once.
func TestV1ClaimReleasedWhenPodDeleted(t *testing.T) {
	e := newEnv(t)
	node := e.createNode("user")
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: e.ns}, Spec: v1ClaimSpec()}
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatalf("create v1 claim: %v", err)
	}
	pod := e.createPod(makePod("user").claim("gpu", "c1").obj())
	e.bindV1(pod, node, "c1")
	e.startController()
	e.consistently("the reservation of a running pod stays", 500*time.Millisecond, func() bool {
		c := e.claimV1("c1")
		return len(c.Status.ReservedFor) == 1 && c.Status.Allocation != nil
	})
	zero := int64(0)
	e.deletePod("user", nil)
	e.deletePod("user", &zero)
	e.eventually("the v1 claim is released", e.releasedV1("c1"))
	if err := e.c.ResourceClaimsV1(e.ns).Delete(e.ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	e.eventually("the claim is gone", func() bool { return e.claimV1("c1") == nil })
}

// A v1 claim generated for a pod that finishes keeps its reservation
// until the node agent reports the pod's claims unprepared; then it is
// released (reservation, allocation, finalizer). The claim itself stays:
// the controller deletes no claims, the garbage collector deletes it
// with its pod.
func TestV1GeneratedClaimOfFinishedPodReleased(t *testing.T) {
	e := newEnv(t)
	e.createTemplateV1("gpu-tmpl")
	node := e.createNode("job")
	e.startController()
	e.createPod(makePod("job").template("gpu", "gpu-tmpl").obj())
	e.eventually("the claim is recorded", func() bool { return e.recordedClaim("job", "gpu") != "" })
	name := e.recordedClaim("job", "gpu")
	pod := e.pod("job")
	e.bindV1(pod, node, name)
	pod = e.pod("job")
	pod.Status.Phase = corev1.PodSucceeded
	pod = e.updatePodStatus(pod)
	e.consistently("a terminal pod's reservation stays until unprepared", 500*time.Millisecond, func() bool {
		return len(e.claimV1(name).Status.ReservedFor) == 1
	})
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResourceClaimsUnprepared, Status: corev1.ConditionTrue})
	e.updatePodStatus(pod)
	e.eventually("the generated v1 claim is released", e.releasedV1(name))
}

// A v1 claim with the delete-protection finalizer and no allocation loses
// the finalizer; deleted, it goes.
func TestV1FinalizerOfUnallocatedClaimRemoved(t *testing.T) {
	e := newEnv(t)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: e.ns,
		Finalizers: []string{resourcev1alpha2.DeleteProtectionFinalizer}}, Spec: v1ClaimSpec()}
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatalf("create v1 claim: %v", err)
	}
	claim.Name = "c2"
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatalf("create v1 claim: %v", err)
	}
	if err := e.c.ResourceClaimsV1(e.ns).Delete(e.ctx, "c2", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	e.startController()
	e.eventually("the finalizer is removed", func() bool { c := e.claimV1("c1"); return c != nil && len(c.Finalizers) == 0 })
	e.eventually("the deleted claim goes", func() bool { return e.claimV1("c2") == nil })
}

// Views are never acted on: a claim read through the other version than
// the one it is stored in is skipped by both syncs, whatever it shows.
func TestViewsAreNotSynced(t *testing.T) {
	e := newEnv(t)
	ctrl, err := New(e.c, client.NewFactory(e.c, 0), Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctrl.c = nil // any API call would panic
	view := map[string]string{resourcev1alpha2.StoredVersionAnnotation: "other"}
	gone := []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: "gone", UID: "uid-gone"}}
	alpha := makeClaim("a").allocated().obj()
	alpha.Namespace, alpha.Annotations, alpha.Status.ReservedFor = e.ns, view, gone
	v1 := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: e.ns, Annotations: view,
		Finalizers: []string{resourcev1alpha2.DeleteProtectionFinalizer}}}
	v1.Status.Allocation = &resourcev1.AllocationResult{}
	v1.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "gone", UID: "uid-gone"}}
	if err := ctrl.claims.GetIndexer().Add(alpha); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.claimsV1.GetIndexer().Add(v1); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.syncClaim(e.ctx, e.ns, "a"); err != nil {
		t.Errorf("syncClaim of a view: %v", err)
	}
	if err := ctrl.syncClaimV1(e.ctx, e.ns, "b"); err != nil {
		t.Errorf("syncClaimV1 of a view: %v", err)
	}
}

// The v1 decisions: a v1 claim with the finalizer is deallocated once
// nobody reserves it (no Immediate mode), its finalizer removed once it is
// not allocated; releaseV1 writes both steps' status in one.
func TestV1Decisions(t *testing.T) {
	claim := func(finalizer, allocated bool, reserved ...string) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
		if finalizer {
			c.Finalizers = []string{resourcev1alpha2.DeleteProtectionFinalizer}
		}
		if allocated {
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: v1Driver, Pool: "n", Device: "gpu-0"}}}}
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: v1Driver, Pool: "n", Device: "gpu-0"}}
		}
		for _, p := range reserved {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID("uid-" + p)})
		}
		return c
	}
	tests := map[string]struct {
		c                           *resourcev1.ResourceClaim
		deallocate, removeFinalizer bool
		drop                        map[types.UID]bool
		changed, allocatedAfter     bool
		reservedAfter               int
	}{
		"allocated, reserved":              {c: claim(true, true, "p"), allocatedAfter: true, reservedAfter: 1},
		"allocated, unused":                {c: claim(true, true), deallocate: true, changed: true},
		"deallocated, finalizer left":      {c: claim(true, false), removeFinalizer: true},
		"no finalizer (not this one's)":    {c: claim(false, true), allocatedAfter: true},
		"last reservation dropped":         {c: claim(true, true, "p"), drop: map[types.UID]bool{"uid-p": true}, changed: true},
		"one of two reservations dropped":  {c: claim(true, true, "p", "q"), drop: map[types.UID]bool{"uid-p": true}, changed: true, allocatedAfter: true, reservedAfter: 1},
		"unknown reservation not dropped":  {c: claim(true, true, "p"), drop: map[types.UID]bool{"uid-x": true}, allocatedAfter: true, reservedAfter: 1},
		"without finalizer, only the drop": {c: claim(false, true, "p"), drop: map[types.UID]bool{"uid-p": true}, changed: true, allocatedAfter: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ShouldDeallocateV1(tc.c); got != tc.deallocate {
				t.Errorf("ShouldDeallocateV1 = %v, want %v", got, tc.deallocate)
			}
			if got := ShouldRemoveFinalizerV1(tc.c); got != tc.removeFinalizer {
				t.Errorf("ShouldRemoveFinalizerV1 = %v, want %v", got, tc.removeFinalizer)
			}
			c := tc.c.DeepCopy()
			if got := releaseV1(c, tc.drop); got != tc.changed {
				t.Errorf("releaseV1 changed = %v, want %v", got, tc.changed)
			}
			if (c.Status.Allocation != nil) != tc.allocatedAfter || len(c.Status.ReservedFor) != tc.reservedAfter {
				t.Errorf("after releaseV1: allocated %v, %d reservations; want %v, %d", c.Status.Allocation != nil, len(c.Status.ReservedFor), tc.allocatedAfter, tc.reservedAfter)
			}
			if c.Status.Allocation == nil && len(c.Status.Devices) > 0 {
				t.Errorf("device statuses of a deallocated claim stay: %+v", c.Status.Devices)
			}
		})
	}
}

// NewClaimFromTemplateV1 builds the metadata NewClaimFromTemplate builds
// for a template with the same metadata, and copies the v1 spec.
func TestNewClaimFromTemplateV1(t *testing.T) {
	pod := makePod("web").obj()
	meta := metav1.ObjectMeta{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}
	v1 := &resourcev1.ResourceClaimTemplate{Spec: resourcev1.ResourceClaimTemplateSpec{ObjectMeta: meta, Spec: v1ClaimSpec()}}
	alpha := &resourcev1alpha2.ResourceClaimTemplate{Spec: resourcev1alpha2.ResourceClaimTemplateSpec{ObjectMeta: meta}}
	got, want := newClaimFromTemplateV1(pod, "gpu", v1), newClaimFromTemplate(pod, "gpu", alpha)
	if !apiequality.Semantic.DeepEqual(got.ObjectMeta, want.ObjectMeta) {
		t.Fatalf("v1 claim's metadata %+v, want %+v", got.ObjectMeta, want.ObjectMeta)
	}
	if !apiequality.Semantic.DeepEqual(got.Spec, v1.Spec.Spec) {
		t.Fatalf("v1 claim's spec %+v, want the template's", got.Spec)
	}
	got.Spec.Devices.Requests[0].Name = "changed"
	got.Labels["a"] = "changed"
	if v1.Spec.Spec.Devices.Requests[0].Name != "gpu" || v1.Spec.Labels["a"] != "b" {
		t.Fatal("the claim shares the template's spec or labels")
	}
	if !isPodClaim(got, pod, "gpu") || isPodClaim(got, makePod("other").obj(), "gpu") || isPodClaim(got, pod, "nic") {
		t.Fatal("isPodClaim does not recognise exactly the pod's entry's v1 claim")
	}
	keys, _ := ownerPodKeys(got)
	if !slices.Equal(keys, []string{"ns/uid-web"}) {
		t.Fatalf("ownerPodKeys of the v1 claim = %v", keys)
	}
	got.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "web", UID: "uid-web"}, {APIGroup: "example.com", Resource: "jobs", Name: "j", UID: "uid-j"}}
	if keys, _ := reservedPodKeys(got); !slices.Equal(keys, []string{"ns/uid-web"}) {
		t.Fatalf("reservedPodKeys of the v1 claim = %v", keys)
	}
}
