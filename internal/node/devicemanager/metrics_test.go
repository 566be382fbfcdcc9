package devicemanager

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	m := startManager(t, socketDir(t))
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", false)).start()
	m.waitServing(t, gpu, 2)
	if err := s.register(); err != nil { // a second registration counts too
		t.Fatal(err)
	}
	_ = newStub(t, m.dir, "x.sock", "bad").register() // refused: not counted
	mustAdmit(t, m, makePod("p").ask("c", gpu, 1).obj())

	want := map[string]float64{
		"device_plugin_registration_total":     2,
		"device_plugin_alloc_duration_seconds": 1, // sample count
		"device_plugin_capacity_devices":       2,
		"device_plugin_allocatable_devices":    1,
	}
	waitFor(t, "metrics", func() bool {
		got := gather(t, m.Registry(), gpu)
		for k, v := range want {
			if got[k] != v {
				t.Logf("%s = %v, want %v", k, got[k], v)
				return false
			}
		}
		return true
	})
}

// gather returns each metric's value (a histogram's sample count) for
// resource_name=res.
func gather(t testing.TB, reg *prometheus.Registry, res string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "resource_name" || l.GetValue() != res {
					continue
				}
				switch {
				case m.Counter != nil:
					out[f.GetName()] = m.GetCounter().GetValue()
				case m.Gauge != nil:
					out[f.GetName()] = m.GetGauge().GetValue()
				case m.Histogram != nil:
					out[f.GetName()] = float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return out
}

func TestHungPreStartFailsContainerOptions(t *testing.T) {
	m := startManager(t, socketDir(t), func(o *Options) { o.RPCTimeout = 200 * time.Millisecond })
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true))
	s.opts.PreStartRequired = true
	s.start()
	m.waitServing(t, gpu, 1)
	pod := makePod("p").ask("c", gpu, 1).obj()
	mustAdmit(t, m, pod)
	s.stop() // the plugin is gone: the container must not start without its pre-start
	waitFor(t, "disconnected", func() bool { return m.res(gpu).State == StateDisconnected })
	start := time.Now()
	if _, err := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("ContainerOptions succeeded without PreStartContainer")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("ContainerOptions took %v", d)
	}
}
