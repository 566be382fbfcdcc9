package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// Extended resources through DRA (KEP-5004): a pod asking for the
// extended resource a DeviceClass names gets, on a node without a device
// plugin for it, a claim the scheduler creates at binding (annotated, the
// pod its controller, one request per container and resource), allocated
// and reserved with the binding, which records it in the pod's
// status.extendedResourceClaimStatus. A node whose allocatable has the
// name serves it by its device plugin: no claim. deviceclass.resource.kubernetes.io/CLASS
// works for any class. When the devices run out, the pod is unschedulable
// and says which class serves the name.
func TestExtendedResourceThroughDRA(t *testing.T) {
	e := newEnv(t, nil,
		schedtest.MakeNode("dra").Alloc("cpu", "8").Alloc("pods", "20").Obj(),
		schedtest.MakeNode("dp").Alloc("cpu", "8").Alloc("pods", "20").Obj())
	ctx := callCtx(t)
	const driver = "gpu.example.com"
	gpu := "example.com/" + e.name // the class's extendedResourceName: unique to the test
	node := e.node("dra")
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node,
			Pool:    resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}, {Name: "gpu-2"}}}}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-gpu"},
		Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: &gpu, Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `"`}}}}}
	must(t, "create slice", func() error { _, err := e.c.ResourceSlices().Create(ctx, slice); return err })
	must(t, "create device class", func() error { _, err := e.c.DeviceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.ResourceSlices().Delete(c, slice.Name, metav1.DeleteOptions{})
		_ = e.c.DeviceClasses().Delete(c, class.Name, metav1.DeleteOptions{})
	})

	// Two GPUs through the class's extendedResourceName; the node with a
	// device plugin has none of it, so only the DRA node fits.
	e.createPod(schedtest.MakePod("two").Req(gpu, "2").Limit(gpu, "2"))
	if got := e.waitBound("two"); got != "dra" {
		t.Fatalf("pod two bound to %s, want dra", got)
	}
	claim := e.extendedClaim("two", map[string]string{gpu: "container-0-request-0"})
	if n := len(claim.Status.Allocation.Devices.Results); n != 2 {
		t.Errorf("claim %s allocates %d devices, want 2", claim.Name, n)
	}

	// One more through deviceclass.resource.kubernetes.io/CLASS.
	byClass := "deviceclass.resource.kubernetes.io/" + class.Name
	e.createPod(schedtest.MakePod("one").Req(byClass, "1").Limit(byClass, "1"))
	if got := e.waitBound("one"); got != "dra" {
		t.Fatalf("pod one bound to %s, want dra", got)
	}
	e.extendedClaim("one", map[string]string{byClass: "container-0-request-0"})

	// The three GPUs are taken: the next pod waits, and says why.
	e.createPod(schedtest.MakePod("more").Req(gpu, "1").Limit(gpu, "1"))
	msg := e.waitUnschedulable("more")
	if want := gpu + ": served by DRA class " + class.Name; !strings.Contains(msg, want) {
		t.Errorf("unschedulable message %q does not contain %q", msg, want)
	}
	if n := e.countExtendedClaims(); n != 2 {
		t.Errorf("%d extended-resource claims, want 2 (none for the pod that did not bind)", n)
	}

	// A node whose device plugin advertises the name serves it that way.
	dp, err := e.c.Nodes().Get(ctx, e.node("dp"))
	if err != nil {
		t.Fatal(err)
	}
	dp.Status.Allocatable[corev1.ResourceName(gpu)] = resource.MustParse("1")
	dp.Status.Capacity[corev1.ResourceName(gpu)] = resource.MustParse("1")
	must(t, "advertise the device plugin's resource", func() error { _, err := e.c.Nodes().UpdateStatus(ctx, dp); return err })
	if got := e.waitBound("more"); got != "dp" {
		t.Fatalf("pod more bound to %s, want dp (its device plugin)", got)
	}
	if p := e.getPod("more"); p.Status.ExtendedResourceClaimStatus != nil {
		t.Errorf("pod more served by the device plugin records a DRA claim: %+v", p.Status.ExtendedResourceClaimStatus)
	}
}

// extendedClaim checks the pod's record of its extended-resource claim
// (want: resource -> request of the pod's only container) and the claim
// itself, and returns the claim.
func (e *env) extendedClaim(pod string, want map[string]string) *resourcev1.ResourceClaim {
	e.t.Helper()
	p := e.getPod(pod)
	st := p.Status.ExtendedResourceClaimStatus
	if st == nil {
		e.t.Fatalf("pod %s is bound without status.extendedResourceClaimStatus", pod)
	}
	if !strings.HasPrefix(st.ResourceClaimName, pod+"-extended-resources-") {
		e.t.Errorf("pod %s: claim name %s, want generated from %s-extended-resources-", pod, st.ResourceClaimName, pod)
	}
	got := map[string]string{}
	for _, m := range st.RequestMappings {
		got[m.ResourceName] = m.RequestName
		if m.ContainerName != p.Spec.Containers[0].Name {
			e.t.Errorf("pod %s: mapping for container %s", pod, m.ContainerName)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Errorf("pod %s: request mappings %v, want %v", pod, got, want)
	}
	c, err := e.c.ResourceClaimsV1(e.ns).Get(callCtx(e.t), st.ResourceClaimName)
	if err != nil {
		e.t.Fatalf("get claim %s: %v", st.ResourceClaimName, err)
	}
	ref := metav1.GetControllerOf(c)
	switch {
	case c.Annotations[corev1.ExtendedResourceClaimAnnotation] != "true":
		e.t.Errorf("claim %s lacks the annotation %s", c.Name, corev1.ExtendedResourceClaimAnnotation)
	case ref == nil || ref.Kind != "Pod" || ref.UID != p.UID:
		e.t.Errorf("claim %s: controller %v, want pod %s", c.Name, ref, pod)
	case c.Status.Allocation == nil:
		e.t.Fatalf("claim %s is not allocated", c.Name)
	case len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID:
		e.t.Errorf("claim %s reserved for %v, want pod %s", c.Name, c.Status.ReservedFor, pod)
	}
	return c
}

// countExtendedClaims counts the test namespace's extended-resource claims.
func (e *env) countExtendedClaims() int {
	e.t.Helper()
	l, err := e.c.ResourceClaimsV1(e.ns).List(callCtx(e.t), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, c := range l.Items {
		if c.Annotations[corev1.ExtendedResourceClaimAnnotation] == "true" {
			n++
		}
	}
	return n
}
