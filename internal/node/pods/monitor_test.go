package pods

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
)

// deviceHealth is a HealthReporter and Monitor over one device whose
// health the test sets; fail is the policy (FailPod or Report).
type deviceHealth struct {
	health corev1.ResourceHealthStatus
	fail   bool
	asked  int
}

func (d *deviceHealth) AllocatedResourcesStatus(_ *corev1.Pod, container string) []corev1.ResourceStatus {
	return []corev1.ResourceStatus{{Name: "example.com/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu-0", Health: d.health}}}}
}

func (d *deviceHealth) PodFailure(*corev1.Pod) *Failure {
	d.asked++
	if !d.fail || d.health != corev1.ResourceHealthStatusUnhealthy {
		return nil
	}
	return &Failure{Reason: ReasonDeviceUnhealthy, Message: "device gpu-0 is unhealthy"}
}

func TestMonitorFailsARunningPod(t *testing.T) {
	dev := &deviceHealth{health: corev1.ResourceHealthStatusHealthy, fail: true}
	adm := &releasingAdmitter{admitFunc: func(context.Context, *corev1.Pod) Admission { return Admitted() }}
	events := &recordedEvents{}
	h := newHarness(t, makePod("p").containers("c1", "c2").obj(), func(c *Config) {
		c.Hooks.Admitters = []Admitter{adm}
		c.Hooks.Monitors = []Monitor{dev}
		c.Hooks.HealthReporters = []HealthReporter{dev}
		c.Events = events
	}).start()
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create c1/0", "start c1/0", "create c2/0", "start c2/0")
	wantPhase(t, h.status(), corev1.PodRunning)

	dev.health = corev1.ResourceHealthStatusUnhealthy
	h.clock.step(time.Second)
	h.sync()
	st := h.status()
	wantPhase(t, st, corev1.PodFailed)
	if st.Reason != ReasonDeviceUnhealthy || st.Message != "device gpu-0 is unhealthy" {
		t.Fatalf("reason %q message %q", st.Reason, st.Message)
	}
	calls := h.rt.takeCalls()
	slices.Sort(calls)
	wantCalls(t, calls, "stop c1/0 grace=30s", "stop c2/0 grace=30s")
	if adm.released != 1 {
		t.Fatalf("released %d times, want once after the failure", adm.released)
	}
	if got := events.with("Warning " + ReasonDeviceUnhealthy); len(got) != 1 {
		t.Fatalf("events %q, want one DeviceUnhealthy warning", events.list)
	}

	// Final: the device recovers, nothing runs again and nobody is asked.
	asked := dev.asked
	dev.health = corev1.ResourceHealthStatusHealthy
	h.clock.step(time.Second)
	h.sync()
	wantCalls(t, h.rt.takeCalls())
	wantPhase(t, h.status(), corev1.PodFailed)
	if dev.asked != asked {
		t.Fatalf("monitor asked about a finished pod")
	}
}

func TestReportOnlyKeepsThePodAndShowsHealth(t *testing.T) {
	dev := &deviceHealth{health: corev1.ResourceHealthStatusHealthy}
	other := &deviceHealth{health: corev1.ResourceHealthStatusHealthy}
	h := newHarness(t, makePod("p").init("i1").containers("c1").obj(), func(c *Config) {
		c.Hooks.Monitors = []Monitor{dev}
		c.Hooks.HealthReporters = []HealthReporter{dev, other}
	}).start()
	h.sync()
	h.rt.exit(t, "i1", 0)
	h.sync()
	dev.health = corev1.ResourceHealthStatusUnhealthy
	h.clock.step(time.Second)
	h.sync()
	st := h.status()
	wantPhase(t, st, corev1.PodRunning)
	got := st.ContainerStatuses[0].AllocatedResourcesStatus
	if len(got) != 2 || got[0].Resources[0].Health != corev1.ResourceHealthStatusUnhealthy ||
		got[1].Resources[0].Health != corev1.ResourceHealthStatusHealthy {
		t.Fatalf("allocatedResourcesStatus %+v, want both reporters' answers in order", got)
	}
	if n := len(st.InitContainerStatuses[0].AllocatedResourcesStatus); n != 0 {
		t.Fatalf("init container has %d allocatedResourcesStatus entries, want none", n)
	}
}

func TestMonitorFailsAHeldPod(t *testing.T) {
	dev := &deviceHealth{health: corev1.ResourceHealthStatusUnhealthy, fail: true}
	hold := admitFunc(func(context.Context, *corev1.Pod) Admission { return HoldPod("WaitingForResourceClaim", "not yet") })
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) {
		c.Hooks.Admitters = []Admitter{hold}
		c.Hooks.Monitors = []Monitor{dev}
	}).start()
	h.sync()
	wantCalls(t, h.rt.takeCalls())
	if st := h.status(); st.Phase != corev1.PodFailed || st.Reason != ReasonDeviceUnhealthy {
		t.Fatalf("phase %s reason %q, want Failed %s", st.Phase, st.Reason, ReasonDeviceUnhealthy)
	}
}
