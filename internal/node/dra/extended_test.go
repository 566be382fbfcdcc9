package dra

import (
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// The claim the scheduler made for a pod's extended resources (recorded in
// status.extendedResourceClaimStatus, not in spec.resourceClaims) is
// prepared like the pod's other claims, and each container gets the
// devices of the requests mapped to it, in its CDI devices and in
// PodResources; releasing the pod unprepares it.
func TestExtendedResourceClaimPrepared(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	const r0, r1 = "container-0-request-0", "container-1-request-0"
	p.OnPrepare(answerByRequest(r0, r1))

	gpu := func(n string) corev1.ResourceRequirements {
		l := corev1.ResourceList{"example.com/gpu": resource.MustParse(n)}
		return corev1.ResourceRequirements{Requests: l, Limits: l}
	}
	pod, err := e.admin.Pods(e.ns).Create(callCtx(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "first", Image: "busybox", Resources: gpu("1")},
			{Name: "second", Image: "busybox", Resources: gpu("1")},
			{Name: "none", Image: "busybox"},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "ext-extended-resources-x",
		Annotations:     map[string]string{corev1.ExtendedResourceClaimAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes}}}}
	for _, r := range []string{r0, r1} {
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: r,
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}})
	}
	if _, err := e.admin.ResourceClaimsV1(e.ns).Create(callCtx(t), claim); err != nil {
		t.Fatal(err)
	}
	a := &resourcev1.AllocationResult{NodeSelector: onNode(e.node)}
	for _, r := range []string{r0, r1} {
		a.Devices.Results = append(a.Devices.Results, upstreamResult(r, e.node, "dev-"+r))
	}
	ext := &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: claim.Name, RequestMappings: []corev1.ContainerExtendedResourceRequest{
		{ContainerName: "first", ResourceName: "example.com/gpu", RequestName: r0},
		{ContainerName: "second", ResourceName: "example.com/gpu", RequestName: r1},
	}}
	pod = e.bindExtended(pod, []string{upstreamDriver}, ext, allocV1(t, claim.Name, a))
	wantAdmitted(t, admit(t, m, pod))

	if calls := p.Prepared(); len(calls) != 1 || len(calls[0]) != 1 {
		t.Fatalf("prepare calls %v, want one with the extended-resource claim", calls)
	}
	want := map[int][]string{
		0: {"example.com/upstream=" + claim.Name + "-" + r0},
		1: {"example.com/upstream=" + claim.Name + "-" + r1},
		2: nil,
	}
	for i, w := range want {
		if got := devicesOf(t, m, pod, i); !slices.Equal(got, w) {
			t.Errorf("container %s gets CDI devices %v, want %v", pod.Spec.Containers[i].Name, got, w)
		}
	}
	wantDyn := map[string]string{
		"first":  e.ns + "/" + claim.Name + ": " + upstreamDriver + " pool dev-" + r0 + " [example.com/upstream=" + claim.Name + "-" + r0 + "]",
		"second": e.ns + "/" + claim.Name + ": " + upstreamDriver + " pool dev-" + r1 + " [example.com/upstream=" + claim.Name + "-" + r1 + "]",
		"none":   "",
	}
	for c, w := range wantDyn {
		if got := dynString(m.ContainerDynamicResources(pod, c)); got != w {
			t.Errorf("PodResources of %s\n got %q\nwant %q", c, got, w)
		}
	}
	if err := m.Release(callCtx(t), pod); err != nil {
		t.Fatal(err)
	}
	if calls := p.Unprepared(); len(calls) != 1 {
		t.Fatalf("unprepare calls %v, want one", calls)
	}
}
