package devicemanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestRegistrationValidation(t *testing.T) {
	dir := socketDir(t)
	startManager(t, dir)
	tests := map[string]struct {
		version, endpoint, resource string
		wantErr                     bool
	}{
		"valid":                  {pluginapi.Version, "gpu.sock", gpu, false},
		"endpoint without .sock": {pluginapi.Version, "gpu", "example.com/gpu2", false},
		"unsupported version":    {"v1alpha", "a.sock", gpu, true},
		"no domain":              {pluginapi.Version, "a.sock", "gpu", true},
		"kubernetes.io":          {pluginapi.Version, "a.sock", "kubernetes.io/gpu", true},
		"sub.kubernetes.io":      {pluginapi.Version, "a.sock", "node.kubernetes.io/gpu", true},
		"requests. namespace":    {pluginapi.Version, "a.sock", "requests.example.com/gpu", true},
		"invalid characters":     {pluginapi.Version, "a.sock", "example.com/g pu", true},
		"endpoint with dir":      {pluginapi.Version, "x/a.sock", gpu, true},
		"endpoint escapes dir":   {pluginapi.Version, "../a.sock", gpu, true},
		"endpoint is kubelet":    {pluginapi.Version, KubeletSocket, gpu, true},
		"empty endpoint":         {pluginapi.Version, "", gpu, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStub(t, dir, tc.endpoint, tc.resource)
			s.endpoint = tc.endpoint
			err := func() error {
				// Register without serving: validation happens first.
				return s.registerWith(tc.version)
			}()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Register err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestValidationErrorsAreSentinels(t *testing.T) {
	cases := map[*pluginapi.RegisterRequest]error{
		{Version: "v0", Endpoint: "a", ResourceName: gpu}:                   ErrUnsupportedVersion,
		{Version: pluginapi.Version, Endpoint: "a", ResourceName: "cpu"}:    ErrInvalidResource,
		{Version: pluginapi.Version, Endpoint: "/a", ResourceName: gpu}:     ErrInvalidEndpoint,
		{Version: pluginapi.Version, Endpoint: "a.sock", ResourceName: gpu}: nil,
	}
	for r, want := range cases {
		if err := validateRegistration(r); !errors.Is(err, want) {
			t.Errorf("validateRegistration(%v) = %v, want %v", r, err, want)
		}
	}
}

func TestStartRemovesStaleSockets(t *testing.T) {
	dir := socketDir(t)
	lis, err := net.Listen("unix", filepath.Join(dir, "stale.sock"))
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close()
	keep := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	startManager(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "stale.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("non-socket file removed: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, KubeletSocket)); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("kubelet.sock not a socket: %v", err)
	}
}

func TestReRegistrationReplacesEndpoint(t *testing.T) {
	m := startManager(t, socketDir(t))
	first := newStub(t, m.dir, "first.sock", gpu, dev("a", true), dev("b", true)).start()
	m.waitServing(t, gpu, 2)

	second := newStub(t, m.dir, "second.sock", gpu, dev("c", true)).start()
	m.waitServing(t, gpu, 1)
	if got := m.res(gpu).Devices[0].ID; got != "c" {
		t.Fatalf("devices after re-registration = %v, want [c]", m.res(gpu).Devices)
	}
	// The replaced plugin going away does not disturb the new one.
	first.stop()
	second.setDevices(dev("c", true), dev("d", true))
	m.waitServing(t, gpu, 2)
	if st := m.res(gpu).State; st != StateServing {
		t.Fatalf("state = %s, want Serving", st)
	}
	if m.Registry() == nil {
		t.Fatal("no metrics registry")
	}
}

func TestFirstEmptyListThenDevices(t *testing.T) {
	m := startManager(t, socketDir(t))
	s := newStub(t, m.dir, "gpu.sock", gpu).start()
	m.waitServing(t, gpu, 0)
	before := m.changes.Load()
	s.setDevices(dev("a", true))
	m.waitServing(t, gpu, 1)
	if m.changes.Load() == before {
		t.Error("OnChange not called for a device change")
	}
}

// TestSecondManagerOnALiveDirFails: a second node agent on the same
// device-plugin dir (a second allot up with the default dir) fails to
// start with an error saying what to do, and leaves the first one's
// kubelet.sock serving.
func TestSecondManagerOnALiveDirFails(t *testing.T) {
	dir := socketDir(t)
	startManager(t, dir)
	m, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = m.Start(ctx)
	if err == nil {
		m.Stop()
		t.Fatal("second Start on a live dir succeeded")
	}
	if !strings.Contains(err.Error(), "served by another node agent") || !strings.Contains(err.Error(), "--device-plugin-dir") {
		t.Fatalf("error does not say what happened and what to do: %v", err)
	}
	c, err := net.DialTimeout("unix", filepath.Join(dir, KubeletSocket), time.Second)
	if err != nil {
		t.Fatalf("the first manager's kubelet.sock no longer serves: %v", err)
	}
	c.Close()
}
