package e2e

import (
	"allot.dev/allot/test/internal/testproc"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevicePluginPods: allot up plus the example device plugin (its own
// process, registering on the node's kubelet.sock). A pod with limits
// example.com/gpu: 2 runs in runc and sees two device nodes and the env var
// from Allocate; a pod asking for more than is left stays Pending with the
// reason; deleting the first pod frees its devices for the other.
func TestDevicePluginPods(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "example-device-plugin")
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", plugin, "./examples/device-plugin")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build example device plugin: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "devices.yaml")
	if err := os.WriteFile(cfg, []byte(`resourceName: example.com/gpu
socket: example-gpu.sock
preStartRequired: true
devices:
- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
- {id: gpu-1, numa: 0, path: /dev/null, containerPath: /dev/gpu1}
- {id: gpu-2, numa: 1, path: /dev/null, containerPath: /dev/gpu2}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pluginDir := filepath.Join(dir, "device-plugins")
	c := newCluster(t)
	c.start(t, "--disable", "", "--node-name", "dp-node", "--device-plugin-dir", pluginDir, "--plugins-registry-dir", "",
		"--pod-resources-socket", filepath.Join(dir, "pod-resources.sock"),
		"--heartbeat-interval", "500ms", "--relist-interval", "200ms")
	t.Cleanup(func() { c.deleteAllPods(t) })
	waitFor(t, "kubelet.sock", func() bool {
		_, err := os.Stat(filepath.Join(pluginDir, "kubelet.sock"))
		return err == nil
	})
	p, err := startProc("example device plugin", childEnv(c.home), plugin, "-config", cfg, "-dir", pluginDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("device plugin stderr:\n%s", tail(p.Stderr.String(), 4000))
		}
		_, _ = p.Terminate(stopGrace)
	})
	waitFor(t, "allocatable example.com/gpu = 3", func() bool {
		return c.jsonpath(t, `{.status.allocatable.example\.com/gpu}`, "node", "dp-node") == "3"
	})

	pod := func(name string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "ls /dev/gpu*; echo EXAMPLE_DEVICES=$EXAMPLE_DEVICES; sleep 1000"]
    resources:
      limits: {example.com/gpu: 2}
`
	}
	c.applyYAML(t, pod("two-gpus"))
	waitFor(t, "two-gpus Running", func() bool { return c.jsonpath(t, "{.status.phase}", "pod", "two-gpus") == "Running" })
	var logs string
	waitFor(t, "two-gpus logs", func() bool {
		logs = c.allot(t, "logs", "two-gpus")
		return strings.Contains(logs, "EXAMPLE_DEVICES=")
	})
	if n := strings.Count(logs, "/dev/gpu"); n != 2 {
		t.Fatalf("container sees %d device nodes, want 2:\n%s", n, logs)
	}
	requireContains(t, "two-gpus logs", logs, "EXAMPLE_DEVICES=gpu-")

	c.applyYAML(t, pod("too-many"))
	waitFor(t, "too-many unschedulable", func() bool {
		return strings.Contains(c.jsonpath(t, "{.status.conditions[0].message}", "pod", "too-many"), "Insufficient example.com/gpu")
	})
	c.allot(t, "delete", "pod", "two-gpus", "--timeout", "60s")
	waitFor(t, "too-many Running once the devices are free", func() bool {
		return c.jsonpath(t, "{.status.phase}", "pod", "too-many") == "Running"
	})
}
