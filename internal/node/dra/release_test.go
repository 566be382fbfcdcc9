package dra

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/pods"
)

// unpreparedCondition returns the pod's ResourceClaimsUnprepared
// condition as stored.
func (e *env) unpreparedCondition(name string) *corev1.PodCondition {
	e.t.Helper()
	p, err := e.admin.Pods(e.ns).Get(callCtx(e.t), name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodResourceClaimsUnprepared {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestReleaseUnpreparesOnceAndSetsCondition(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	pod := e.readyPod("p", "gpu", gpuDriver)
	// Another component's condition must survive.
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	pod, err := e.admin.Pods(e.ns).UpdateStatus(callCtx(t), pod)
	if err != nil {
		t.Fatal(err)
	}
	wantAdmitted(t, admit(t, m, pod))
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := claimNames(p.Unprepared()); !slices.EqualFunc(got, [][]string{{"gpu"}}, slices.Equal) {
		t.Fatalf("unprepare calls %v, want one with the claim", got)
	}
	if c := p.Unprepared()[0][0]; c.GetResourceHandle() != "handle-of-gpu" {
		t.Fatalf("unprepared claim %+v, want the handle sent to prepare", c)
	}
	c := e.unpreparedCondition("p")
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonUnprepared {
		t.Fatalf("condition %+v", c)
	}
	stored, _ := e.admin.Pods(e.ns).Get(callCtx(t), "p")
	if len(stored.Status.Conditions) != 2 {
		t.Fatalf("conditions %+v, want PodScheduled kept beside ResourceClaimsUnprepared", stored.Status.Conditions)
	}
	if err := release(t, m, pod); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if n := len(p.Unprepared()); n != 1 {
		t.Fatalf("%d unprepare calls after a second Release, want still 1", n)
	}
	if _, err := m.ContainerOptions(t.Context(), pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("container options of a released claim, want an error")
	}
	if n := metric(t, m, "dra_prepared_claims"); n != 0 {
		t.Errorf("dra_prepared_claims = %v, want 0", n)
	}
	if n := metric(t, m, "dra_operations_duration_seconds", "driver", gpuDriver, "operation", opUnprepare); n != 1 {
		t.Errorf("unprepare duration samples = %v, want 1", n)
	}
}

func TestReleaseRetriesUntilTheDriverUnprepares(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	pod := e.readyPod("p", "gpu", gpuDriver)
	wantAdmitted(t, admit(t, m, pod))

	p.OnUnprepare(func(*drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
		return nil, status.Error(codes.Unavailable, "busy")
	})
	err := release(t, m, pod)
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("Release = %v, want the driver's error", err)
	}
	// The worker waits for the back-off the error names, and is told
	// that a call during it made no attempt.
	var ra pods.RetryAfter
	if !errors.As(err, &ra) || ra.BackingOff() || !ra.RetryAt().After(time.Now()) {
		t.Fatalf("Release error %v does not say when to retry", err)
	}
	if err := release(t, m, pod); !errors.As(err, &ra) || !ra.BackingOff() {
		t.Fatalf("Release during the back-off = %v, want a BackingOff error", err)
	}
	if c := e.unpreparedCondition("p"); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonUnprepareFailed ||
		!strings.Contains(c.Message, "busy") {
		t.Fatalf("condition after a failed unprepare = %+v, want False, %s, with the driver's error", c, ReasonUnprepareFailed)
	}
	p.Unregister()
	eventually(t, "driver unregistered", func() (bool, string) { return m.drivers.get(gpuDriver) == nil, "" })
	eventually(t, "release refused without the driver", func() (bool, string) {
		err := release(t, m, pod)
		return err != nil && strings.Contains(err.Error(), "driver "+gpuDriver+" is not registered"), errString(err)
	})
	wantMsg := "waiting for DRA driver " + gpuDriver + " to unprepare claim " + e.ns + "/gpu"
	c := e.unpreparedCondition("p")
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonWaitingForDriver ||
		!strings.Contains(c.Message, wantMsg) || !strings.Contains(c.Message, "--force") {
		t.Fatalf("condition without the driver = %+v, want False, %s, %q and how to force", c, ReasonWaitingForDriver, wantMsg)
	}
	if evs := strings.Join(e.events.all(), "\n"); !strings.Contains(evs, "Warning "+ReasonWaitingForDriver+" "+wantMsg) {
		t.Fatalf("no %s event naming the driver and the claim:\n%s", ReasonWaitingForDriver, evs)
	}
	p.OnUnprepare(nil)
	p.Register()
	eventually(t, "released once the driver is back", func() (bool, string) {
		err := release(t, m, pod)
		return err == nil, errString(err)
	})
	if c := e.unpreparedCondition("p"); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
}

// TestUnprepareNotFoundIsSuccess: a driver that no longer knows the claim
// has nothing to undo.
func TestUnprepareNotFoundIsSuccess(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	pod := e.readyPod("p", "gpu", gpuDriver)
	wantAdmitted(t, admit(t, m, pod))
	p.OnUnprepare(func(*drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
		return nil, status.Error(codes.NotFound, "claim unknown")
	})
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := m.store.count(); n != 0 {
		t.Fatalf("%d claims still recorded", n)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestSharedClaimPreparedOnce(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	e.claim("shared")
	e.allocate("shared", gpuDriver)
	a, b := e.pod("a", "shared"), e.pod("b", "shared")
	e.reserve("shared", a, b)

	wantAdmitted(t, admit(t, m, a))
	wantAdmitted(t, admit(t, m, b))
	if n := len(p.Prepared()); n != 1 {
		t.Fatalf("%d prepare calls, want 1 for a claim shared by two pods", n)
	}
	want := []string{dratest.DeviceFor("shared")}
	for _, pod := range []*corev1.Pod{a, b} {
		if got := containerDevices(t, m, pod); !slices.Equal(got, want) {
			t.Fatalf("pod %s devices %q, want %q", pod.Name, got, want)
		}
	}
	if err := release(t, m, a); err != nil {
		t.Fatalf("Release a: %v", err)
	}
	if n := len(p.Unprepared()); n != 0 {
		t.Fatalf("%d unprepare calls while pod b still uses the claim", n)
	}
	if c := e.unpreparedCondition("a"); c == nil {
		t.Fatal("pod a has no ResourceClaimsUnprepared condition: its part is done")
	}
	if got := containerDevices(t, m, b); !slices.Equal(got, want) {
		t.Fatalf("pod b devices after a's release %q", got)
	}
	if err := release(t, m, b); err != nil {
		t.Fatalf("Release b: %v", err)
	}
	if n := len(p.Unprepared()); n != 1 {
		t.Fatalf("%d unprepare calls after the last user left, want 1", n)
	}
}

func TestHeldPodReleasedWithoutDriverCalls(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	e.claim("gpu")
	pod := e.pod("p", "gpu")
	waitHold(t, m, pod, ReasonWaitingForClaim, "is not allocated")
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release of a pod that never prepared: %v", err)
	}
	if c := e.unpreparedCondition("p"); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
}
