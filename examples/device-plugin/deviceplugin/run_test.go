package deviceplugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const threeGPUs = `resourceName: example.com/gpu
socket: example-gpu.sock
preStartRequired: true
cdiKind: example.com/gpu
devices:
- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
- {id: gpu-1, numa: 1, path: /dev/null, containerPath: /dev/gpu1}
- {id: gpu-2, numa: 1, path: /dev/null}
`

// runPlugin runs Run in-process until the test ends and returns a channel
// that yields Run's result.
func runPlugin(t *testing.T, cfg Config) <-chan error {
	t.Helper()
	var logs syncBuffer
	cfg.Logger = newTestLogger(&logs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("plugin log:\n%s", logs.String())
		}
	})
	return done
}

// TestRun: registration, the DevicePlugin service over the real socket,
// health from the control file and SIGUSR1, and registration again when
// kubelet.sock is re-created.
func TestRun(t *testing.T) {
	dir := socketDir(t)
	files := t.TempDir()
	cfgFile, control := filepath.Join(files, "devices.yaml"), filepath.Join(files, "unhealthy")
	writeFile(t, cfgFile, threeGPUs)
	// Catch SIGUSR1 here too, so that the signal never takes the default
	// action (exit) should it arrive before Run listens for it.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	t.Cleanup(func() { signal.Stop(usr1) })

	k := startKubelet(t, dir)
	runPlugin(t, Config{ConfigFile: cfgFile, Dir: dir, Control: control, Poll: 10 * time.Millisecond,
		CDIDir: filepath.Join(files, "cdi"), RegisterRetry: 10 * time.Millisecond})
	reg := k.registration(t)
	if reg.ResourceName != "example.com/gpu" || reg.Endpoint != "example-gpu.sock" || reg.Version != pluginapi.Version ||
		!reg.Options.PreStartRequired || !reg.Options.GetPreferredAllocationAvailable {
		t.Fatalf("registration = %+v", reg)
	}

	p := dialPlugin(t, dir, reg.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	devs := watchDevices(t, ctx, p)
	devs.waitFor(t, "three healthy devices", func(d []*pluginapi.Device) bool {
		return len(d) == 3 && unhealthy(d) == "" && d[1].Topology.Nodes[0].ID == 1
	})

	pref, err := p.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"gpu-0", "gpu-1", "gpu-2"}, AllocationSize: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pref.ContainerResponses[0].DeviceIDs; !slices.Equal(got, []string{"gpu-1", "gpu-2"}) {
		t.Fatalf("preferred %v, want the NUMA-local [gpu-1 gpu-2]", got)
	}
	alloc, err := p.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"gpu-1", "gpu-2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	cr := alloc.ContainerResponses[0]
	if cr.Envs["EXAMPLE_DEVICES"] != "gpu-1,gpu-2" || len(cr.Devices) != 2 || cr.Devices[0].ContainerPath != "/dev/gpu1" ||
		cr.Devices[1].ContainerPath != "/dev/null" || len(cr.CdiDevices) != 2 || cr.CdiDevices[1].Name != "example.com/gpu=gpu-2" {
		t.Fatalf("Allocate = %+v", cr)
	}
	if _, err := p.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"gpu-9"}}}}); err == nil ||
		!strings.Contains(err.Error(), `unknown device "gpu-9"`) {
		t.Fatalf("Allocate of an unknown device: err = %v", err)
	}
	if _, err := p.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: []string{"gpu-1"}}); err != nil {
		t.Fatal(err)
	}

	writeFile(t, control, "gpu-0\n# a comment\n")
	devs.waitFor(t, "gpu-0 unhealthy", func(d []*pluginapi.Device) bool { return unhealthy(d) == "gpu-0" })
	writeFile(t, control, "")
	devs.waitFor(t, "all healthy again", func(d []*pluginapi.Device) bool { return unhealthy(d) == "" })
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	devs.waitFor(t, "all unhealthy after SIGUSR1", func(d []*pluginapi.Device) bool { return unhealthy(d) == "gpu-0,gpu-1,gpu-2" })

	// The kubelet restarts: kubelet.sock is re-created and the plugin
	// registers again.
	k.stop()
	k2 := startKubelet(t, dir)
	if reg := k2.registration(t); reg.ResourceName != "example.com/gpu" {
		t.Fatalf("registration after restart = %+v", reg)
	}
}

// TestRunRetriesUntilKubeletListens: without kubelet.sock the plugin keeps
// trying, and registers once it appears.
func TestRunRetriesUntilKubeletListens(t *testing.T) {
	dir := socketDir(t)
	cfgFile := filepath.Join(t.TempDir(), "devices.yaml")
	writeFile(t, cfgFile, "resourceName: example.com/fpga\ndevices: [{id: f0}]\n")
	runPlugin(t, Config{ConfigFile: cfgFile, Dir: dir, CDIDir: t.TempDir(), RegisterRetry: 10 * time.Millisecond})
	time.Sleep(50 * time.Millisecond) // a few failed attempts
	k := startKubelet(t, dir)
	if reg := k.registration(t); reg.ResourceName != "example.com/fpga" || reg.Endpoint != defaultSocketName {
		t.Fatalf("registration = %+v", reg)
	}
}

// TestRunCDISpecLifetime: the CDI spec exists while the plugin runs and is
// removed when it stops; Run returns nil when stopped.
func TestRunCDISpecLifetime(t *testing.T) {
	dir, files := socketDir(t), t.TempDir()
	cfgFile, cdiDir := filepath.Join(files, "devices.yaml"), filepath.Join(files, "cdi")
	writeFile(t, cfgFile, threeGPUs)
	k := startKubelet(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ConfigFile: cfgFile, Dir: dir, CDIDir: cdiDir, Logger: newTestLogger(&syncBuffer{})})
	}()
	k.registration(t)
	spec := filepath.Join(cdiDir, "example_com-gpu.json")
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("CDI spec while running: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after stop = %v, want nil", err)
	}
	if _, err := os.Stat(spec); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CDI spec after stop: stat err = %v, want not exist", err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "devices.yaml")
		writeFile(t, p, content)
		return p
	}
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"missing file":      {Config{ConfigFile: filepath.Join(dir, "nope.yaml")}, "read config"},
		"no resource name":  {Config{ConfigFile: write("devices: [{id: a}]\n")}, "resourceName is required"},
		"unknown field":     {Config{ConfigFile: write("resourceName: x/y\ncolour: red\n")}, `unknown field "colour"`},
		"repeated id":       {Config{ConfigFile: write("resourceName: x/y\ndevices: [{id: a}, {id: a}]\n")}, `device 1: empty or repeated id "a"`},
		"socket is a path":  {Config{ConfigFile: write("resourceName: x/y\nsocket: ../x.sock\n")}, `socket "../x.sock": must be a file name`},
		"negative poll":     {Config{ConfigFile: write("resourceName: x/y\n"), Poll: -time.Second}, "poll: must not be negative"},
		"plugin dir absent": {Config{ConfigFile: write("resourceName: x/y\n"), Dir: filepath.Join(dir, "absent")}, "watch " + filepath.Join(dir, "absent")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.cfg.CDIDir = t.TempDir()
			tc.cfg.Logger = newTestLogger(&syncBuffer{})
			err := Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// deviceWatch follows a ListAndWatch stream.
type deviceWatch struct {
	mu     sync.Mutex
	latest []*pluginapi.Device
	err    error
}

func watchDevices(t *testing.T, ctx context.Context, p pluginapi.DevicePluginClient) *deviceWatch {
	t.Helper()
	stream, err := p.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	w := &deviceWatch{}
	go func() {
		for {
			resp, err := stream.Recv()
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.latest = resp.Devices
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *deviceWatch) waitFor(t *testing.T, what string, cond func([]*pluginapi.Device) bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		w.mu.Lock()
		latest, err := w.latest, w.err
		w.mu.Unlock()
		if latest != nil && cond(latest) {
			return
		}
		if err != nil {
			t.Fatalf("waiting for %s: stream ended: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; devices: %v", what, latest)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unhealthy lists the unhealthy device IDs, comma-separated, in order.
func unhealthy(devs []*pluginapi.Device) string {
	var ids []string
	for _, d := range devs {
		if d.Health != pluginapi.Healthy {
			ids = append(ids, d.ID)
		}
	}
	return strings.Join(ids, ",")
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
