package devicemanager

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"allot.dev/allot/internal/node/runtime"
)

// TestExamplePlugin runs examples/device-plugin against the manager:
// registration, NUMA-aware preferred allocation, Allocate options,
// PreStartContainer, health from the control file and SIGUSR1, and
// re-registration when the manager restarts.
func TestExamplePlugin(t *testing.T) {
	dir := socketDir(t)
	cfg := filepath.Join(t.TempDir(), "plugin.yaml")
	control := filepath.Join(t.TempDir(), "unhealthy")
	writeFile(t, cfg, `resourceName: example.com/gpu
socket: example-gpu.sock
preStartRequired: true
cdiKind: example.com/gpu
devices:
- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
- {id: gpu-1, numa: 1, path: /dev/null, containerPath: /dev/gpu1}
- {id: gpu-2, numa: 1, path: /dev/null, containerPath: /dev/gpu2}
`)
	m := startManager(t, dir)
	var logs bytes.Buffer
	cmd := exec.Command(examplePlugin, "-dir", dir, "-config", cfg, "-control", control, "-poll", "20ms", "-cdi-dir", filepath.Join(dir, "cdi"))
	cmd.Stderr = &syncWriter{buf: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("plugin log:\n%s", logs.String())
		}
	})
	m.waitServing(t, gpu, 3)
	if r := m.res(gpu); !r.Options.PreStartRequired || !r.Options.GetPreferredAllocationAvailable {
		t.Fatalf("options = %+v", r.Options)
	}

	pod := makePod("p").ask("c", gpu, 2).obj()
	mustAdmit(t, m, pod)
	if got := m.ids("p", "c", gpu); !slices.Equal(got, []string{"gpu-1", "gpu-2"}) {
		t.Fatalf("got %v, want the plugin's NUMA-local [gpu-1 gpu-2]", got)
	}
	opts, err := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	wantDevs := []runtime.Device{{HostPath: "/dev/null", ContainerPath: "/dev/gpu1", Permissions: "rw"}, {HostPath: "/dev/null", ContainerPath: "/dev/gpu2", Permissions: "rw"}}
	if !slices.Equal(opts.Env, []string{"EXAMPLE_DEVICES=gpu-1,gpu-2"}) || !slices.Equal(opts.Devices, wantDevs) ||
		!slices.Equal(opts.CDIDevices, []string{"example.com/gpu=gpu-1", "example.com/gpu=gpu-2"}) {
		t.Fatalf("ContainerOptions = %+v", opts)
	}

	writeFile(t, control, "gpu-0\n")
	waitFor(t, "gpu-0 unhealthy", func() bool { return m.res(gpu).Allocatable == 2 })
	writeFile(t, control, "")
	waitFor(t, "gpu-0 healthy", func() bool { return m.res(gpu).Allocatable == 3 })

	// The manager restarts: kubelet.sock is re-created, the plugin
	// registers again, and the pod keeps its devices.
	m.Stop()
	m2 := startManager(t, dir)
	m2.waitServing(t, gpu, 3)
	if got := m2.ids("p", "c", gpu); !slices.Equal(got, []string{"gpu-1", "gpu-2"}) {
		t.Fatalf("after restart p holds %v", got)
	}
	mustAdmit(t, m2, pod)

	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all unhealthy after SIGUSR1", func() bool { return m2.res(gpu).Allocatable == 0 })
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
