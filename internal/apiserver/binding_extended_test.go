package apiserver

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// A binding records the claim made for a pod's extended resources in the
// pod's status, in its one transaction, after checking it: the claim is
// among the binding's claims, generated for the pod and marked as such,
// and each mapping names a container, a resource it requests and a
// request of the claim. Once recorded the record does not change, by a
// binding or a status write.
func TestBindingRecordsExtendedResourceClaim(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "bind-ext")
	pod := makePod("p").obj()
	gpus := corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}
	pod.Spec.Containers[0].Resources.Requests, pod.Spec.Containers[0].Resources.Limits = gpus, gpus
	r := admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", pod)
	expect(t, r, 201)
	r.into(t, pod)

	yes := true
	claim := func(name string, uid types.UID, annotated bool) *resourcev1.ResourceClaim {
		c := v1Claim(name)
		c.Spec.Devices.Requests[0].Name = "container-0-request-0"
		c.Spec.Devices.Config = nil
		c.Spec.Devices.Requests[0].Exactly.Count = 2
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: uid, Controller: &yes}}
		if annotated {
			c.Annotations = map[string]string{corev1.ExtendedResourceClaimAnnotation: "true"}
		}
		return c
	}
	for _, c := range []*resourcev1.ResourceClaim{claim("p-ext", pod.UID, true), claim("unmarked", pod.UID, false), claim("others", "other-uid", true)} {
		expect(t, admin(t, "POST", path1(ns, "resourceclaims"), c), 201)
	}
	alloc := func(name string) corev1.BindingResourceClaim {
		a := v1Alloc("bind-ext", "gpu-0")
		a.Devices.Results[0].Request = "container-0-request-0"
		b := *a.Devices.Results[0].DeepCopy()
		b.Device = "gpu-1"
		a.Devices.Results = append(a.Devices.Results, b)
		return corev1.BindingResourceClaim{Name: name, Allocation: &runtime.RawExtension{Raw: mustJSON(t, a)}}
	}
	mapping := func(claim, container, res, request string) *corev1.PodExtendedResourceClaimStatus {
		return &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: claim,
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: container, ResourceName: res, RequestName: request}}}
	}
	podPath := "/api/v1/namespaces/" + ns + "/pods/p"
	bind := func(st *corev1.PodExtendedResourceClaimStatus, claims ...corev1.BindingResourceClaim) resp {
		b := bindingWith(t, "bind-ext", currentRev(t), claims...)
		b.ExtendedResourceClaimStatus = st
		return admin(t, "POST", podPath+"/binding", b)
	}
	c0 := pod.Spec.Containers[0].Name
	for _, tc := range []struct {
		st     *corev1.PodExtendedResourceClaimStatus
		claims []corev1.BindingResourceClaim
		code   int
		want   string
	}{
		{mapping("p-ext", c0, "example.com/gpu", "container-0-request-0"), nil, 422, "must be one of the binding's resourceClaims"},
		{mapping("p-ext", "nope", "example.com/gpu", "container-0-request-0"), []corev1.BindingResourceClaim{alloc("p-ext")}, 422, "requestMappings[0].containerName"},
		{mapping("p-ext", c0, "example.com/fpga", "container-0-request-0"), []corev1.BindingResourceClaim{alloc("p-ext")}, 422, "must be a resource container " + c0 + " requests"},
		{mapping("p-ext", c0, "cpu", "container-0-request-0"), []corev1.BindingResourceClaim{alloc("p-ext")}, 422, "must be an extended resource"},
		{mapping("p-ext", c0, "example.com/gpu", "Bad_Name"), []corev1.BindingResourceClaim{alloc("p-ext")}, 422, "requestMappings[0].requestName"},
		{mapping("p-ext", c0, "example.com/gpu", "container-0-request-9"), []corev1.BindingResourceClaim{alloc("p-ext")}, 400, "container-0-request-9"},
		{mapping("unmarked", c0, "example.com/gpu", "container-0-request-0"), []corev1.BindingResourceClaim{alloc("unmarked")}, 400, "lacks the annotation " + corev1.ExtendedResourceClaimAnnotation},
		{mapping("others", c0, "example.com/gpu", "container-0-request-0"), []corev1.BindingResourceClaim{alloc("others")}, 400, "not generated for pod p"},
	} {
		expect(t, bind(tc.st, tc.claims...), tc.code, tc.want)
	}
	// Nothing of the refused bindings stuck.
	var got corev1.Pod
	admin(t, "GET", podPath, nil).into(t, &got)
	if got.Spec.NodeName != "" || got.Status.ExtendedResourceClaimStatus != nil {
		t.Fatalf("after refused bindings: node %q, extended claim %+v", got.Spec.NodeName, got.Status.ExtendedResourceClaimStatus)
	}

	good := mapping("p-ext", c0, "example.com/gpu", "container-0-request-0")
	expect(t, bind(good, alloc("p-ext")), 201)
	admin(t, "GET", podPath, nil).into(t, &got)
	if got.Spec.NodeName != "bind-ext" || got.Status.ExtendedResourceClaimStatus == nil || got.Status.ExtendedResourceClaimStatus.ResourceClaimName != "p-ext" {
		t.Fatalf("bound pod: node %q, extended claim %+v", got.Spec.NodeName, got.Status.ExtendedResourceClaimStatus)
	}
	var c resourcev1.ResourceClaim
	admin(t, "GET", path1(ns, "resourceclaims")+"/p-ext", nil).into(t, &c)
	if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != got.UID {
		t.Fatalf("claim p-ext not allocated and reserved: %+v", c.Status)
	}

	// The record stays: a status write may not change it, and one that
	// leaves it out (a writer that does not know the field) keeps it.
	changed := got.DeepCopy()
	changed.Status.ExtendedResourceClaimStatus.ResourceClaimName = "others"
	expect(t, admin(t, "PUT", podPath+"/status", changed), 422, "status.extendedResourceClaimStatus: Forbidden: is recorded by the pod's binding")
	dropped := got.DeepCopy()
	dropped.Status.ExtendedResourceClaimStatus = nil
	dropped.Status.Message = "written without the field"
	expect(t, admin(t, "PUT", podPath+"/status", dropped), 200)
	admin(t, "GET", podPath, nil).into(t, &got)
	if got.Status.Message != "written without the field" || got.Status.ExtendedResourceClaimStatus == nil || got.Status.ExtendedResourceClaimStatus.ResourceClaimName != "p-ext" {
		t.Fatalf("after a status write without the record: message %q, extended claim %+v", got.Status.Message, got.Status.ExtendedResourceClaimStatus)
	}
	// A second binding of the bound pod may repeat the record, not change it.
	other := mapping("others", c0, "example.com/gpu", "container-0-request-0")
	expect(t, bind(other, corev1.BindingResourceClaim{Name: "others"}), 409, "already records claim p-ext")
}
