package apiserver

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/allocator"
)

// The devices of a v1 claim count in its class's implicit extended
// resource too (requests.deviceclass.resource.kubernetes.io/CLASS), so a
// quota on that name limits the devices pods get through it, whose
// claims the scheduler makes.
func TestClaimQuotaImplicitExtendedResource(t *testing.T) {
	ns := newNamespace(t)
	const name = "requests.deviceclass.resource.kubernetes.io/gpu.example.com"
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		name: mustQuantity("2"),
	}}}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/resourcequotas", quota), 201)
	big := v1Claim("big")
	big.Spec.Devices.Requests[0].Exactly.Count = 3
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), big), 403, name)
	two := v1Claim("two")
	two.Spec.Devices.Requests[0].Exactly.Count = 2
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), two), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("one")), 403, name)
	var q corev1.ResourceQuota
	admin(t, "GET", "/api/v1/namespaces/"+ns+"/resourcequotas/q", nil).into(t, &q)
	if u := q.Status.Used[name]; u.Value() != 2 {
		t.Errorf("%s used = %s, want 2", name, u.String())
	}
}

// The scheduler creates, and deletes after a failed binding, the claims
// of pods' extended resources; no other claim.
func TestSchedulerWritesOnlyExtendedResourceClaims(t *testing.T) {
	ns := newNamespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "u1"}}
	expect(t, call(t, "sched", "POST", path1(ns, "resourceclaims"), v1Claim("plain")), 403, "extended resources")
	unmarked := v1Claim("unmarked")
	unmarked.OwnerReferences = []metav1.OwnerReference{allocator.PodOwnerReference(pod)}
	expect(t, call(t, "sched", "POST", path1(ns, "resourceclaims"), unmarked), 403, "extended resources")
	ext := v1Claim("ext")
	ext.OwnerReferences = []metav1.OwnerReference{allocator.PodOwnerReference(pod)}
	ext.Annotations = map[string]string{corev1.ExtendedResourceClaimAnnotation: "true"}
	expect(t, call(t, "sched", "POST", path1(ns, "resourceclaims"), ext), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("users")), 201)
	expect(t, call(t, "sched", "DELETE", path1(ns, "resourceclaims")+"/users", nil), 403, "extended resources")
	expect(t, call(t, "sched", "DELETE", path1(ns, "resourceclaims")+"/ext", nil), 200)
}
