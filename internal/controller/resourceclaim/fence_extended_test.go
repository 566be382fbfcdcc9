package resourceclaim

import (
	"encoding/json"
	"testing"
	"time"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
)

// TestEvictedFromUnreachableNodeExtendedResource: the claim the scheduler
// makes for a pod's extended resources (a v1 claim the pod controls,
// annotated resource.kubernetes.io/extended-resource-claim, recorded in
// the pod's status by the binding) is released by the fencing rule as
// any claim: node-local, at once once the evicted pod's toleration of the
// unreachable taint has run out, although the node still lists it
// prepared and records no fence time.
func TestEvictedFromUnreachableNodeExtendedResource(t *testing.T) {
	e := newEnv(t)
	node := e.createNode("n")
	const res, request = "example.com/gpu", "container-0-request-0"
	p := tolerating(makePod("user").obj(), 0)
	one := corev1.ResourceList{res: resource.MustParse("1")}
	p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Resources.Limits = one, one
	pod := e.createPod(p)

	yes := true
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "user-ext", Namespace: e.ns,
		Annotations:     map[string]string{corev1.ExtendedResourceClaimAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes}}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: request, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatal(err)
	}
	alloc := &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: request, Driver: v1Driver, Pool: node, Device: "gpu-0"}}},
		NodeSelector: oneNodeSelector(node),
	}
	raw, err := json.Marshal(alloc)
	if err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{
		Target:           corev1.ObjectReference{Kind: "Node", Name: node},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: claim.Name, DriverName: v1Driver, Allocation: &runtime.RawExtension{Raw: raw}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: node, DriverName: v1Driver, Revision: pod.ResourceVersion}},
		ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: claim.Name,
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: res, RequestName: request}}},
	}
	b.APIVersion, b.Kind = "v1", "Binding"
	if _, err := e.c.Bind(e.ctx, e.ns, pod.Name, b); err != nil {
		t.Fatalf("bind pod %s with its extended-resource claim: %v", pod.Name, err)
	}
	if c := e.claimV1(claim.Name); c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 || fence.AllocationV1ReachesOtherNodes(c.Status.Allocation) {
		t.Fatalf("binding did not allocate (node-local) and reserve the extended-resource claim: %+v", c.Status)
	}
	e.listPrepared(e.asNode(node), node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: claim.Name, UID: e.claimV1(claim.Name).UID, Pods: []types.UID{pod.UID}})
	ctrl, _ := e.startController()
	e.taintUnreachable(node, time.Now().Add(-time.Hour))
	e.deletePod("user", nil)
	e.eventually("the node-local extended-resource claim is released", e.releasedV1(claim.Name))
	if n := fencedReleases(t, ctrl, devicesNodeLocal); n < 1 {
		t.Fatalf("resource_controller_fenced_releases_total{devices=%q} is %v, want at least 1", devicesNodeLocal, n)
	}
}

// oneNodeSelector selects one node by name, as allocators write a
// node-local v1 allocation.
func oneNodeSelector(node string) *k8scorev1.NodeSelector {
	return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchFields: []k8scorev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}
