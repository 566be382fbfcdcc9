package devicemanager

import (
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
)

func TestUnhealthyDevicesLeaveAllocatableAndRecover(t *testing.T) {
	m := startManager(t, socketDir(t))
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true)).start()
	m.waitServing(t, gpu, 2)

	s.setDevices(dev("a", true), dev("b", false))
	waitFor(t, "b unhealthy", func() bool { return m.res(gpu).Allocatable == 1 })
	node := &corev1.Node{}
	m.DecorateNode(node)
	if c, a := node.Status.Capacity[gpu], node.Status.Allocatable[gpu]; c.Value() != 2 || a.Value() != 1 {
		t.Fatalf("capacity/allocatable = %s/%s, want 2/1", c.String(), a.String())
	}
	// The unhealthy device is never handed out.
	wantVerdict(t, admit(t, m, makePod("p").ask("c", gpu, 2).obj()), pods.Reject, ReasonInsufficientDevices)
	mustAdmit(t, m, makePod("q").ask("c", gpu, 1).obj())
	if got := m.ids("q", "c", gpu); len(got) != 1 || got[0] != "a" {
		t.Fatalf("q got %v, want [a]", got)
	}

	s.setDevices(dev("a", true), dev("b", true))
	waitFor(t, "b healthy again", func() bool { return m.res(gpu).Allocatable == 2 })
	st := m.AllocatedResourcesStatus(makePod("q").obj(), "c")
	if len(st) != 1 || st[0].Resources[0].Health != corev1.ResourceHealthStatusHealthy {
		t.Fatalf("AllocatedResourcesStatus = %+v", st)
	}
}

func TestPluginStopMakesDevicesUnhealthyThenRemovesResource(t *testing.T) {
	m := startManager(t, socketDir(t))
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true)).start()
	m.waitServing(t, gpu, 2)
	mustAdmit(t, m, makePod("running").ask("c", gpu, 1).obj())

	stopped := time.Now()
	s.stop()
	waitFor(t, "devices unhealthy", func() bool {
		r := m.res(gpu)
		return r.State == StateDisconnected && r.Capacity == 2 && r.Allocatable == 0
	})
	// Unhealthy at once: observed as Disconnected, before the grace period
	// removes the resource (checked below), not by a timing bound.
	st := m.AllocatedResourcesStatus(makePod("running").obj(), "c")
	if st[0].Resources[0].Health != corev1.ResourceHealthStatusUnhealthy {
		t.Errorf("running pod's device health = %s, want Unhealthy", st[0].Resources[0].Health)
	}
	wantVerdict(t, admit(t, m, makePod("new").ask("c", gpu, 1).obj()), pods.Reject, ReasonResourceUnavailable)

	waitFor(t, "resource removed", func() bool { return m.res(gpu).State == StateRemoved })
	if time.Since(stopped) < 900*time.Millisecond {
		t.Errorf("resource removed after %v, before the 1s grace period", time.Since(stopped))
	}
	node := &corev1.Node{}
	m.DecorateNode(node)
	if c := node.Status.Capacity[gpu]; c.Value() != 0 {
		t.Errorf("capacity after removal = %s, want 0", c.String())
	}
	wantVerdict(t, admit(t, m, makePod("new2").ask("c", gpu, 1).obj()), pods.Reject, ReasonResourceUnavailable)
	// The running pod keeps its devices.
	if got := m.ids("running", "c", gpu); len(got) != 1 {
		t.Fatalf("running pod lost its devices: %v", got)
	}

	// Re-registration brings it back; the running pod's device is still
	// taken.
	s2 := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true)).start()
	_ = s2
	m.waitServing(t, gpu, 2)
	mustAdmit(t, m, makePod("after").ask("c", gpu, 1).obj())
	if a, b := m.ids("running", "c", gpu)[0], m.ids("after", "c", gpu)[0]; a == b {
		t.Fatalf("device %s handed out twice", a)
	}
}

func TestReRegistrationWithinGraceKeepsResource(t *testing.T) {
	m := startManager(t, socketDir(t), func(o *Options) { o.GracePeriod = 300 * time.Millisecond })
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true)).start()
	m.waitServing(t, gpu, 1)
	s.stop()
	waitFor(t, "disconnected", func() bool { return m.res(gpu).State == StateDisconnected })
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("z", true)).start()
	m.waitServing(t, gpu, 2)
	time.Sleep(500 * time.Millisecond) // past the old grace timer
	if r := m.res(gpu); r.State != StateServing || r.Allocatable != 2 {
		t.Fatalf("after grace: %s %d, want Serving 2", r.State, r.Allocatable)
	}
}
