package dynamicresources

import (
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// The pod's extended resources that DeviceClasses map become requests
// container-I-request-J (I over init containers, then containers; J over
// the container's names, sorted), count = quantity, the serving class;
// names no class maps, and cpu, stay out. On a node whose allocatable has
// a name, the device plugin serves it: that name is left out of the
// claim, and a node serving all of them by device plugins gets none.
func TestExtendedRequestsAndClaim(t *testing.T) {
	gpu, nic := "example.com/gpu", "example.com/nic"
	classes := []*resourcev1.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: &gpu}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nic"}},
	}
	objs := NewObjects(Lists{DeviceClasses: classes})
	res := func(kv ...string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
		for i := 0; i < len(kv); i += 2 {
			r.Limits[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return r
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: res(gpu, "1")}},
		Containers: []corev1.Container{
			{Name: "a", Resources: res("cpu", "1", "example.com/fpga", "1")},
			{Name: "b", Resources: res(gpu, "2", "deviceclass.resource.kubernetes.io/nic", "3", nic, "1")},
		},
	}}
	reqs := extendedRequests(pod, objs.catalog)
	if got, want := fmt.Sprint(reqs), "[{0 init example.com/gpu 1 gpu} {2 b deviceclass.resource.kubernetes.io/nic 3 nic} {2 b example.com/gpu 2 gpu}]"; got != want {
		t.Fatalf("extendedRequests = %s, want %s", got, want)
	}
	s := &stateData{objects: objs, v1: &v1Part{pod: pod, ext: &extendedPart{reqs: reqs}}}
	node := func(alloc ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: res(alloc...).Limits}}
		return n
	}
	v := s.variantOn(node("cpu", "4"))
	if v == nil {
		t.Fatal("no claim on a node without device plugins")
	}
	c := v.claim
	if c.GenerateName != "p-extended-resources-" || c.Annotations[corev1.ExtendedResourceClaimAnnotation] != "true" ||
		metav1.GetControllerOf(c) == nil || metav1.GetControllerOf(c).UID != "u1" {
		t.Errorf("claim metadata %+v: want generateName p-extended-resources-, the annotation, the pod as controller", c.ObjectMeta)
	}
	var got []string
	for _, r := range c.Spec.Devices.Requests {
		got = append(got, fmt.Sprintf("%s:%s×%d", r.Name, r.Exactly.DeviceClassName, r.Exactly.Count))
	}
	if want := "[container-0-request-0:gpu×1 container-2-request-0:nic×3 container-2-request-1:gpu×2]"; fmt.Sprint(got) != want {
		t.Errorf("requests %v, want %s", got, want)
	}
	if want := "[{init example.com/gpu container-0-request-0} {b deviceclass.resource.kubernetes.io/nic container-2-request-0} {b example.com/gpu container-2-request-1}]"; fmt.Sprint(v.mappings) != want {
		t.Errorf("mappings %v, want %s", v.mappings, want)
	}
	if s.variantOn(node("cpu", "8")) != v {
		t.Error("a second node serving the same names built another claim")
	}
	// A device plugin serves example.com/gpu: only the nic is DRA's.
	dp := s.variantOn(node(gpu, "4"))
	if dp == nil || len(dp.claim.Spec.Devices.Requests) != 1 || dp.mappings[0].ResourceName != "deviceclass.resource.kubernetes.io/nic" {
		t.Fatalf("on a node with a gpu device plugin: %+v, want the nic request only", dp)
	}
	if s.variantOn(node(gpu, "4", "deviceclass.resource.kubernetes.io/nic", "3")) != nil {
		t.Error("a node whose device plugins serve every name got a claim")
	}
	// Filter names the class that serves each name.
	st := servedStatus(dp, reqs, nil)
	if st.Reasons()[0] != "deviceclass.resource.kubernetes.io/nic: served by DRA class nic" {
		t.Errorf("status %v", st.Reasons())
	}
}
