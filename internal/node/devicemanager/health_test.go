package devicemanager

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

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

func TestUnhealthyDeviceFailsPodsHoldingIt(t *testing.T) {
	var woken sync.Map
	m := startManager(t, socketDir(t), func(o *Options) { o.Wake = func(uid types.UID) { woken.Store(uid, true) } })
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true)).start()
	m.waitServing(t, gpu, 2)
	holder := makePod("holder").ask("c", gpu, 1).obj()
	mustAdmit(t, m, holder)
	other := makePod("other").ask("c", gpu, 1).obj()
	mustAdmit(t, m, other)
	held := m.ids("holder", "c", gpu)[0]
	if f := m.PodFailure(holder); f != nil {
		t.Fatalf("PodFailure with healthy devices: %+v", f)
	}

	devs := []*pluginapi.Device{dev("a", held != "a"), dev("b", held != "b")}
	s.setDevices(devs...)
	waitFor(t, held+" unhealthy", func() bool { return m.res(gpu).Allocatable == 1 })
	f := m.PodFailure(holder)
	if f == nil || f.Reason != pods.ReasonDeviceUnhealthy || !strings.Contains(f.Message, "device "+held+" of "+gpu) ||
		!strings.Contains(f.Message, "container c") {
		t.Fatalf("PodFailure = %+v, want %s naming the device and container", f, pods.ReasonDeviceUnhealthy)
	}
	if f := m.PodFailure(other); f != nil {
		t.Fatalf("PodFailure of the pod holding the healthy device: %+v", f)
	}
	for _, p := range []*corev1.Pod{holder, other} {
		if _, ok := woken.Load(p.UID); !ok {
			t.Errorf("pod %s holding %s devices not woken", p.Name, gpu)
		}
	}

	// Init containers' devices do not fail the pod.
	s.setDevices(dev("a", true), dev("b", true))
	waitFor(t, "healthy again", func() bool { return m.res(gpu).Allocatable == 2 })
	for _, p := range []*corev1.Pod{holder, other} {
		if err := m.Release(context.Background(), p); err != nil {
			t.Fatalf("release %s: %v", p.Name, err)
		}
	}
	initOnly := makePod("init").askInit("i", gpu, 1).obj()
	initOnly.Spec.Containers = append(initOnly.Spec.Containers, corev1.Container{Name: "main"})
	mustAdmit(t, m, initOnly)
	s.setDevices(dev("a", false), dev("b", false))
	waitFor(t, "all unhealthy", func() bool { return m.res(gpu).Allocatable == 0 })
	if f := m.PodFailure(initOnly); f != nil {
		t.Fatalf("PodFailure for an init container's device: %+v", f)
	}

	// A plugin that goes away fails nothing (seed 001), though its
	// devices are unhealthy in the status.
	s.setDevices(dev("a", true), dev("b", true))
	waitFor(t, "healthy again", func() bool { return m.res(gpu).Allocatable == 2 })
	again := makePod("again").ask("c", gpu, 1).obj()
	mustAdmit(t, m, again)
	s.stop()
	waitFor(t, "disconnected", func() bool { return m.res(gpu).State == StateDisconnected })
	if f := m.PodFailure(again); f != nil {
		t.Fatalf("PodFailure after the plugin went away: %+v", f)
	}
	if st := m.AllocatedResourcesStatus(again, "c"); st[0].Resources[0].Health != corev1.ResourceHealthStatusUnhealthy {
		t.Fatalf("status after the plugin went away: %+v", st)
	}
}
