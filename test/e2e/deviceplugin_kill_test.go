package e2e

import (
	"allot.dev/allot/test/internal/testproc"

	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// TestDevicePluginKill9: a separate `allot node` process with the example
// device plugin registered in its plugin directory. A pod holding two of
// the three devices survives kill -9 of the node agent (same container, no
// double allocation afterwards); killing the plugin drops the resource to
// 0 after the grace period while the pod keeps running, and a new pod for
// one device waits until the plugin is back.
func TestDevicePluginKill9(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := t.TempDir()
	plugin := buildExamplePlugin(t, dir)
	cfg := filepath.Join(dir, "devices.yaml")
	if err := os.WriteFile(cfg, []byte(`resourceName: example.com/gpu
socket: example-gpu.sock
devices:
- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
- {id: gpu-1, numa: 0, path: /dev/null, containerPath: /dev/gpu1}
- {id: gpu-2, numa: 1, path: /dev/null, containerPath: /dev/gpu2}
`), 0o644); err != nil {
		t.Fatal(err)
	}

	const nodeName = "dpkill-node"
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", nodeName)
	root := t.TempDir()
	pluginDir := filepath.Join(root, "device-plugins") // what startNode passes
	podResources := filepath.Join(root, "pod-resources", "kubelet.sock")
	nodeArgs := []string{"--device-plugin-grace-period", "1s", "--pod-resources-socket", podResources}
	agent := c.startNode(t, nodeName, "runc", root, nodeArgs...)
	t.Cleanup(func() { c.deleteAllPods(t) })

	startPlugin := func() *proc {
		t.Helper()
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
				t.Logf("device plugin (pid %d) stderr:\n%s", p.PID(), tail(p.Stderr.String(), 4000))
			}
			_, _ = p.Terminate(stopGrace)
		})
		return p
	}
	allocatable := func() string {
		return c.jsonpath(t, `{.status.allocatable.example\.com/gpu}`, "node", nodeName)
	}
	capacity := func() string {
		return c.jsonpath(t, `{.status.capacity.example\.com/gpu}`, "node", nodeName)
	}
	phase := func(pod string) string { return c.jsonpath(t, "{.status.phase}", "pod", pod) }
	pod := func(name string, n int) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo EXAMPLE_DEVICES=$EXAMPLE_DEVICES; sleep 1000"]
    resources:
      limits: {example.com/gpu: ` + string(rune('0'+n)) + `}
`
	}
	devicesOf := func(name string) string {
		var line string
		waitFor(t, name+" logs", func() bool {
			for _, l := range strings.Split(c.allot(t, "logs", name), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "EXAMPLE_DEVICES="); ok {
					line = v
					return true
				}
			}
			return false
		})
		return line
	}

	plug := startPlugin()
	waitFor(t, "allocatable example.com/gpu = 3", func() bool { return allocatable() == "3" })

	c.applyYAML(t, pod("holder", 2))
	waitFor(t, "holder Running", func() bool { return phase("holder") == "Running" })
	held := devicesOf("holder")
	if n := len(strings.Split(held, ",")); n != 2 || !strings.Contains(held, "gpu-") {
		t.Fatalf("holder got devices %q, want 2", held)
	}
	started := c.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "holder")
	id := c.jsonpath(t, "{.status.containerStatuses[0].containerID}", "pod", "holder")
	sameContainer := func(when string) {
		t.Helper()
		if p := phase("holder"); p != "Running" {
			t.Fatalf("%s: holder phase %s, want Running", when, p)
		}
		if got := c.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "holder"); got != started {
			t.Fatalf("%s: holder container restarted: startedAt %s, was %s", when, got, started)
		}
		if got := c.jsonpath(t, "{.status.containerStatuses[0].containerID}", "pod", "holder"); got != id {
			t.Fatalf("%s: holder container replaced: id %s, was %s", when, got, id)
		}
	}

	// kill -9 the node agent; the plugin re-registers on the new kubelet.sock.
	agent.Kill()
	c.startNode(t, nodeName, "runc", root, nodeArgs...)
	time.Sleep(2 * time.Second) // several relists and heartbeats of the new agent
	waitFor(t, "allocatable example.com/gpu = 3 after the agent restart", func() bool { return allocatable() == "3" })
	waitFor(t, "holder Running after the agent restart", func() bool { return phase("holder") == "Running" })
	sameContainer("after the agent restart")
	heldSorted := strings.Split(held, ",")
	slices.Sort(heldSorted)
	if got, want := podResourcesDevices(t, podResources, "holder", "main", "example.com/gpu"), strings.Join(heldSorted, ","); got != want {
		t.Fatalf("PodResources List after the restart: holder/main has %q, want %q", got, want)
	}

	// Only one device is free: a pod for two must not run.
	c.applyYAML(t, pod("second", 2))
	time.Sleep(3 * time.Second)
	if p := phase("second"); p == "Running" {
		got := devicesOf("second")
		t.Fatalf("second pod Running with devices %q while holder has %q: double allocation", got, held)
	}
	if p := phase("second"); p != "Pending" {
		t.Fatalf("second pod phase %q, want Pending", p)
	}
	c.allot(t, "delete", "pod", "second", "--timeout", "60s")

	// Kill the plugin: after the 1s grace period the resource is gone.
	plug.Kill()
	waitFor(t, "capacity and allocatable example.com/gpu = 0 without the plugin", func() bool {
		return capacity() == "0" && allocatable() == "0"
	})
	c.applyYAML(t, pod("one", 1))
	time.Sleep(3 * time.Second)
	if p := phase("one"); p != "Pending" {
		t.Fatalf("pod for one device phase %q without the plugin, want Pending", p)
	}
	sameContainer("with the plugin gone")

	startPlugin()
	waitFor(t, "pod for one device Running once the plugin is back", func() bool { return phase("one") == "Running" })
	got := devicesOf("one")
	for _, d := range strings.Split(got, ",") {
		if strings.Contains(","+held+",", ","+d+",") {
			t.Fatalf("pod one got %q, overlapping holder's %q", got, held)
		}
	}
	sameContainer("after the plugin restart")
	c.deleteAllPods(t)
}

// listPodResources calls the node's PodResources API List.
func listPodResources(t *testing.T, socket string) []*podresourcesapi.PodResources {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("PodResources List: %v", err)
	}
	return resp.GetPodResources()
}

// podResourcesDevices asks the node's PodResources API (List) for the
// device IDs of a container of a pod in the default namespace, joined
// with commas in the order given.
func podResourcesDevices(t *testing.T, socket, pod, container, resource string) string {
	t.Helper()
	var ids []string
	for _, p := range listPodResources(t, socket) {
		if p.GetName() != pod || p.GetNamespace() != "default" {
			continue
		}
		for _, c := range p.GetContainers() {
			if c.GetName() != container {
				continue
			}
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == resource {
					ids = append(ids, d.GetDeviceIds()...)
				}
			}
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// buildExamplePlugin builds examples/device-plugin into dir.
func buildExamplePlugin(t *testing.T, dir string) string {
	t.Helper()
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
	return plugin
}
