package dra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"allot.dev/allot/internal/node/dra/dratest"
)

func TestRegistrationValidation(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	for _, tc := range []struct {
		name   string
		driver string
		info   func(*registerapi.PluginInfo)
		want   string
	}{
		{"wrong type", "csi.example.com", func(i *registerapi.PluginInfo) { i.Type = registerapi.CSIPlugin }, "unsupported plugin type"},
		{"name not a DNS subdomain", "GPU_Driver", nil, "invalid driver name"},
		{"no supported version", "old.example.com", func(i *registerapi.PluginInfo) { i.SupportedVersions = []string{"v1alpha0", "v1beta1"} }, "unsupported DRA API version"},
		{"relative endpoint", "rel.example.com", func(i *registerapi.PluginInfo) { i.Endpoint = "dra.sock" }, "invalid endpoint"},
		{"empty endpoint", "none.example.com", func(i *registerapi.PluginInfo) { i.Endpoint = "" }, "invalid endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dratest.Start(t, dratest.Options{Name: tc.driver, RegistryDir: e.registry, Info: tc.info})
			st := p.Status(t)
			if st.PluginRegistered || !strings.Contains(st.Error, tc.want) {
				t.Fatalf("status %+v, want refused with %q", st, tc.want)
			}
			if names := m.drivers.names(); len(names) != 0 {
				t.Fatalf("registered drivers %v after a refused registration", names)
			}
		})
	}
	if n := metric(t, m, "dra_operation_errors_total", "driver", "old.example.com", "operation", opRegister); n != 1 {
		t.Errorf("register errors of old.example.com = %v, want 1", n)
	}
	p := dratest.Start(t, dratest.Options{Name: gpuDriver, RegistryDir: e.registry})
	if st := p.Status(t); !st.PluginRegistered || st.Error != "" {
		t.Fatalf("valid registration refused: %+v", st)
	}
	eventually(t, "driver registered", func() (bool, string) { return m.drivers.get(gpuDriver) != nil, "" })
	if n := metric(t, m, "dra_registered_drivers"); n != 1 {
		t.Errorf("dra_registered_drivers = %v, want 1", n)
	}
}

func TestNewRegistrationReplacesOld(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	first := e.plugin(m, gpuDriver, func(o *dratest.Options) { o.RegSocket = "first.sock" })
	second := dratest.Start(t, dratest.Options{Name: gpuDriver, RegistryDir: e.registry, RegSocket: "second.sock"})
	if st := second.Status(t); !st.PluginRegistered {
		t.Fatalf("second registration refused: %s", st.Error)
	}
	eventually(t, "second plugin current", func() (bool, string) {
		d := m.drivers.get(gpuDriver)
		return d != nil && d.endpoint == second.DRAPath, ""
	})

	pod := e.readyPod("p", "c", gpuDriver)
	wantAdmitted(t, admit(t, m, pod))
	if len(first.Prepared()) != 0 || len(second.Prepared()) != 1 {
		t.Fatalf("prepare calls: first plugin %d, second %d; want only the second", len(first.Prepared()), len(second.Prepared()))
	}

	// The replaced plugin going away does not unregister its successor.
	first.Unregister()
	time.Sleep(300 * time.Millisecond)
	if d := m.drivers.get(gpuDriver); d == nil || d.endpoint != second.DRAPath {
		t.Fatalf("driver after the old plugin left: %+v", d)
	}
	second.Unregister()
	eventually(t, "driver unregistered", func() (bool, string) {
		n := metric(t, m, "dra_registered_drivers")
		return m.drivers.get(gpuDriver) == nil && n == 0, fmt.Sprintf("dra_registered_drivers %v", n)
	})
}

func TestDriverGoneWhenStreamCannotBeReopened(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver, func(o *dratest.Options) { o.Model = model("gpu-0") })
	p.StopDRA() // the registration socket stays: only the stream tells
	eventually(t, "driver unregistered", func() (bool, string) { return m.drivers.get(gpuDriver) == nil, "" })
}

func TestDriverWithoutResourcesStaysRegistered(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	e.plugin(m, gpuDriver, func(o *dratest.Options) { o.NoResources = true })
	time.Sleep(500 * time.Millisecond) // several redial intervals
	if m.drivers.get(gpuDriver) == nil {
		t.Fatal("a driver that publishes no resources was unregistered")
	}
	pod := e.readyPod("p", "c", gpuDriver)
	wantAdmitted(t, admit(t, m, pod))
}

// Two registrations of one driver that finish out of order: the one whose
// socket was seen last stays current.
func TestLaterRegistrationWinsWhateverTheOrder(t *testing.T) {
	s := newDriverSet()
	later := &driver{name: gpuDriver, seq: 2}
	if _, err := s.add(later); err != nil {
		t.Fatal(err)
	}
	earlier := &driver{name: gpuDriver, seq: 1}
	if _, err := s.add(earlier); !errors.Is(err, errSuperseded) {
		t.Fatalf("earlier registration finishing last: err %v, want %v", err, errSuperseded)
	}
	if s.get(gpuDriver) != later {
		t.Fatal("the earlier registration replaced the later one")
	}
	again := &driver{name: gpuDriver, seq: 3}
	if old, err := s.add(again); err != nil || len(old) != 1 || old[0] != later {
		t.Fatalf("a newer registration: old %v err %v, want it to replace %p", old, err, later)
	}
}

// TestSecondManagerOnTheRegistryDirFails: a second node agent on the same
// plugins registry dir (a second allot up with the default dir) would
// register every driver there with its node too; it fails to start,
// saying what to do, and the first keeps running. Once the first stops,
// the dir is free.
func TestSecondManagerOnTheRegistryDirFails(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	second, err := New(e.options())
	if err != nil {
		t.Fatal(err)
	}
	err = second.Start(context.Background())
	if err == nil {
		second.Stop()
		t.Fatal("a second manager started on the same registry dir")
	}
	if !strings.Contains(err.Error(), "watched by another node agent") || !strings.Contains(err.Error(), "--plugins-registry-dir") {
		t.Fatalf("error does not say what happened and what to do: %v", err)
	}
	first.Stop()
	third, err := New(e.options())
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Start(context.Background()); err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	third.Stop()
}
