package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeAtomic replaces path's content the way config management does
// (a temporary file renamed into place), so a reader never sees half of
// it.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// healthPod is a pod on node that holds n example.com/gpu devices.
func healthPod(name, node string, n int) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  nodeName: ` + node + `
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["sleep", "1000"]
    resources:
      limits: {example.com/gpu: ` + string(rune('0'+n)) + `}
`
}

// deviceHealth reads the first allocatedResourcesStatus entry of a pod's
// first container: "NAME ID HEALTH", empty while there is none.
func deviceHealth(t *testing.T, c *cluster, ns, pod string) string {
	t.Helper()
	out := c.jsonpath(t, `{.status.containerStatuses[0].allocatedResourcesStatus[0].name} `+
		`{.status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].resourceID} `+
		`{.status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].health}`, "pod", pod, "-n", ns)
	return strings.TrimSpace(out)
}

// TestDevicePluginHealth: two nodes run the example device plugin with
// two devices, one node under the default FailPod policy, one under
// Report. The plugin marks the device a pod holds unhealthy (its control
// file): on the FailPod node the pod fails with reason DeviceUnhealthy, on
// the Report node it keeps running and its status shows the device
// Unhealthy; allocatable drops to 1 on both. The device recovers:
// allocatable is 2 again, and a pod for both devices runs, with nothing
// restarted.
func TestDevicePluginHealth(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := t.TempDir()
	plugin := buildExamplePlugin(t, dir)
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", "dph-fail")

	type node struct{ name, control string }
	var nodes []node
	for _, n := range []struct{ name, policy string }{{"dph-fail", "FailPod"}, {"dph-report", "Report"}} {
		root := t.TempDir()
		pluginDir := filepath.Join(root, "device-plugins")
		cfg := filepath.Join(dir, n.name+".yaml")
		control := filepath.Join(dir, n.name+".unhealthy")
		if err := os.WriteFile(cfg, []byte(`resourceName: example.com/gpu
socket: example-gpu.sock
devices:
- {id: gpu-0, path: /dev/null, containerPath: /dev/gpu0}
- {id: gpu-1, path: /dev/null, containerPath: /dev/gpu1}
`), 0o644); err != nil {
			t.Fatal(err)
		}
		writeAtomic(t, control, "")
		c.startNode(t, n.name, "runc", root, "--unhealthy-device-policy", n.policy)
		waitFor(t, n.name+" kubelet.sock", func() bool {
			_, err := os.Stat(filepath.Join(pluginDir, "kubelet.sock"))
			return err == nil
		})
		p, err := startProc("example device plugin "+n.name, childEnv(c.home), plugin,
			"-config", cfg, "-dir", pluginDir, "-control", control, "-poll", "100ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("device plugin %s (pid %d) stderr:\n%s", n.name, p.PID(), tail(p.Stderr.String(), 4000))
			}
			_, _ = p.Terminate(stopGrace)
		})
		nodes = append(nodes, node{name: n.name, control: control})
	}
	// Registered after the nodes and plugins: it runs before they stop.
	t.Cleanup(func() { c.deleteAllPods(t) })
	allocatable := func(n string) string { return c.jsonpath(t, `{.status.allocatable.example\.com/gpu}`, "node", n) }
	capacity := func(n string) string { return c.jsonpath(t, `{.status.capacity.example\.com/gpu}`, "node", n) }
	phase := func(pod string) string { return c.jsonpath(t, "{.status.phase}", "pod", pod) }

	held := map[string]string{} // pod → device ID
	for _, n := range nodes {
		waitFor(t, n.name+" allocatable example.com/gpu = 2", func() bool { return allocatable(n.name) == "2" })
		pod := n.name + "-pod"
		c.applyYAML(t, healthPod(pod, n.name, 1))
		waitFor(t, pod+" Running", func() bool { return phase(pod) == "Running" })
		var h string
		waitFor(t, pod+" device Healthy in its status", func() bool {
			h = deviceHealth(t, c, "default", pod)
			return strings.HasSuffix(h, " Healthy")
		})
		f := strings.Fields(h)
		if f[0] != "example.com/gpu" || !strings.HasPrefix(f[1], "gpu-") {
			t.Fatalf("%s allocatedResourcesStatus %q, want example.com/gpu gpu-N Healthy", pod, h)
		}
		held[pod] = f[1]
	}
	started := c.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "dph-report-pod")

	// The plugins mark the held devices unhealthy.
	for _, n := range nodes {
		writeAtomic(t, n.control, held[n.name+"-pod"]+"\n")
	}
	waitFor(t, "dph-fail-pod Failed", func() bool { return phase("dph-fail-pod") == "Failed" })
	if r, m := c.jsonpath(t, "{.status.reason}", "pod", "dph-fail-pod"), c.jsonpath(t, "{.status.message}", "pod", "dph-fail-pod"); r != "DeviceUnhealthy" ||
		!strings.Contains(m, held["dph-fail-pod"]) {
		t.Fatalf("failed pod: reason %q message %q, want DeviceUnhealthy naming %s", r, m, held["dph-fail-pod"])
	}
	waitFor(t, "dph-report-pod shows its device Unhealthy", func() bool {
		return deviceHealth(t, c, "default", "dph-report-pod") == "example.com/gpu "+held["dph-report-pod"]+" Unhealthy"
	})
	for _, n := range nodes {
		waitFor(t, n.name+" allocatable 1 of capacity 2", func() bool { return allocatable(n.name) == "1" && capacity(n.name) == "2" })
	}
	if p := phase("dph-report-pod"); p != "Running" {
		t.Fatalf("dph-report-pod phase %s under the Report policy, want Running", p)
	}

	// Recovery: allocatable again without restarting anything.
	for _, n := range nodes {
		writeAtomic(t, n.control, "")
	}
	waitFor(t, "dph-report-pod's device Healthy again", func() bool {
		return deviceHealth(t, c, "default", "dph-report-pod") == "example.com/gpu "+held["dph-report-pod"]+" Healthy"
	})
	waitFor(t, "dph-fail allocatable 2 again", func() bool { return allocatable("dph-fail") == "2" })
	c.applyYAML(t, healthPod("both", "dph-fail", 2))
	waitFor(t, "a pod for both devices Running on dph-fail", func() bool { return phase("both") == "Running" })
	if p, s := phase("dph-report-pod"), c.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "dph-report-pod"); p != "Running" || s != started {
		t.Fatalf("dph-report-pod: phase %s startedAt %s, want Running since %s (never restarted)", p, s, started)
	}
	c.deleteAllPods(t)
}

// healthModel is two whole 16Gi GPUs; health0 and health1 are their
// health fields ("" for none).
func healthModel(health0, health1 string) string {
	field := func(h string) string {
		if h == "" {
			return ""
		}
		return "\n    health: " + h
	}
	return `partitionable:
  commonAttributes:
  - name: common
    attributes:
    - {name: runtimeVersion, version: "11.1.42"}
    - {name: productName, string: ACME T1000}
  resourceInstances:
  - name: gpu-0
    commonAttributesRefs: [common]
    attributes:
    - {name: memory, quantity: 16Gi}` + field(health0) + `
  - name: gpu-1
    commonAttributesRefs: [common]
    attributes:
    - {name: memory, quantity: 16Gi}` + field(health1) + `
`
}

// TestDRAInstanceHealth: the example DRA driver's model marks the
// instance a pod holds Unhealthy. Under Report (the node's first run) the
// pod keeps running, its status shows the instance Unhealthy and the
// slice publishes health: Unhealthy; recovered, it shows Healthy. The
// node restarts under FailPod: the instance goes unhealthy again and the
// pod fails with reason DeviceUnhealthy. A new pod gets the other GPU; a
// third waits, since the unhealthy one is never allocated, and runs once
// it recovers. Last, with the node agent stopped, deleting the Node
// garbage-collects its NodeResourceSlice (owned by the Node).
func TestDRAInstanceHealth(t *testing.T) {
	t.Parallel()
	const nodeName = "dra-health"
	d := newDRACluster(t, nodeName, healthModel("", ""), nil, []string{"--unhealthy-device-policy", "Report"})
	d.applyYAML(t, namespace("hw")+"---\n"+gpuParams("hw", "whole", `{count: 1, minimumMemory: 16Gi}`)+"---\n"+
		claimTemplate("hw", "whole", "whole")+"---\n"+
		draPod("hw", "watcher", "  - {name: gpu, resourceClaimTemplateName: whole}", "main"))
	waitFor(t, "pod watcher Running", func() bool { return d.phase(t, "hw", "watcher") == "Running" })
	var h string
	waitFor(t, "watcher's instance Healthy in its status", func() bool {
		h = deviceHealth(t, d.cluster, "hw", "watcher")
		return strings.HasSuffix(h, " Healthy")
	})
	f := strings.Fields(h)
	if f[0] != "claim:gpu" || (f[1] != "gpu.example.com/gpu-0" && f[1] != "gpu.example.com/gpu-1") {
		t.Fatalf("watcher allocatedResourcesStatus %q, want claim:gpu gpu.example.com/gpu-N Healthy", h)
	}
	instance := strings.TrimPrefix(f[1], "gpu.example.com/")
	other := "gpu-1"
	model := func(sick string) string {
		if instance == "gpu-0" {
			return healthModel(sick, "")
		}
		return healthModel("", sick)
	}
	if instance == "gpu-1" {
		other = "gpu-0"
	}
	sliceHealth := func() string {
		return d.jsonpath(t, `{.items[0].spec.partitionable.resourceInstances[?(@.name=="`+instance+`")].health}`,
			"noderesourceslices", "--field-selector", "spec.nodeName="+nodeName)
	}
	started := d.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "watcher", "-n", "hw")

	t.Logf("watcher holds %s", instance)

	// Report: the pod keeps running and sees the health.
	writeAtomic(t, d.modelFile, model("Unhealthy"))
	waitFor(t, "the slice publishes "+instance+" Unhealthy", func() bool { return sliceHealth() == "Unhealthy" })
	waitFor(t, "watcher shows its instance Unhealthy", func() bool {
		return deviceHealth(t, d.cluster, "hw", "watcher") == "claim:gpu gpu.example.com/"+instance+" Unhealthy"
	})
	if p := d.phase(t, "hw", "watcher"); p != "Running" {
		t.Fatalf("watcher phase %s under the Report policy, want Running", p)
	}
	writeAtomic(t, d.modelFile, model("Healthy"))
	waitFor(t, "watcher shows its instance Healthy again", func() bool {
		return deviceHealth(t, d.cluster, "hw", "watcher") == "claim:gpu gpu.example.com/"+instance+" Healthy"
	})

	t.Log("Report policy: watcher kept running and saw the health")

	// FailPod: restart the node agent with it; the pod is adopted.
	if _, err := d.node.Terminate(stopGrace); err != nil {
		t.Logf("stop node agent: %v", err)
	}
	d.nodeArgs = append(d.nodeArgs, "--unhealthy-device-policy", "FailPod")
	d.restartNode(t)
	waitFor(t, "the restarted agent reports the instance Healthy", func() bool {
		return deviceHealth(t, d.cluster, "hw", "watcher") == "claim:gpu gpu.example.com/"+instance+" Healthy"
	})
	if s := d.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "watcher", "-n", "hw"); s != started {
		t.Fatalf("watcher restarted with the agent: startedAt %s, was %s", s, started)
	}
	writeAtomic(t, d.modelFile, model("Unhealthy"))
	waitFor(t, "watcher Failed", func() bool { return d.phase(t, "hw", "watcher") == "Failed" })
	if r, m := d.jsonpath(t, "{.status.reason}", "pod", "watcher", "-n", "hw"), d.jsonpath(t, "{.status.message}", "pod", "watcher", "-n", "hw"); r != "DeviceUnhealthy" ||
		!strings.Contains(m, instance) {
		t.Fatalf("watcher: reason %q message %q, want DeviceUnhealthy naming %s", r, m, instance)
	}

	// The unhealthy instance is never allocated. Deleting the failed pod
	// deletes its claim, so only the health keeps the instance out.
	d.allot(t, "delete", "pod", "watcher", "-n", "hw", "--timeout", "60s")
	d.applyYAML(t, draPod("hw", "first", "  - {name: gpu, resourceClaimTemplateName: whole}", "main"))
	waitFor(t, "pod first Running", func() bool { return d.phase(t, "hw", "first") == "Running" })
	if line := d.logLine(t, "hw", "first", "main"); !strings.Contains(line, other) {
		t.Fatalf("pod first: %q, want the healthy %s", line, other)
	}
	d.applyYAML(t, draPod("hw", "second", "  - {name: gpu, resourceClaimTemplateName: whole}", "main"))
	waitFor(t, "pod second unschedulable", func() bool {
		return d.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].reason}`, "pod", "second", "-n", "hw") == "Unschedulable"
	})
	writeAtomic(t, d.modelFile, model(""))
	waitFor(t, "pod second Running on the recovered instance", func() bool { return d.phase(t, "hw", "second") == "Running" })
	if line := d.logLine(t, "hw", "second", "main"); !strings.Contains(line, instance) {
		t.Fatalf("pod second: %q, want the recovered %s", line, instance)
	}

	t.Log("FailPod policy: watcher failed; the unhealthy instance was not allocated until it recovered")

	// Seed 002: the slices go with their Node.
	if _, stderr, err := d.runKubectl("delete", "pods", "--all", "-n", "hw", "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("delete pods: %v: %s", err, stderr)
	}
	if _, err := d.node.Terminate(stopGrace); err != nil {
		t.Logf("stop node agent: %v", err)
	}
	if n := d.kubectl(t, "get", "noderesourceslices", "--field-selector", "spec.nodeName="+nodeName, "-o", "name"); strings.TrimSpace(n) == "" {
		t.Fatalf("no slice of %s before the Node's deletion", nodeName)
	}
	d.kubectl(t, "delete", "node", nodeName)
	waitFor(t, "the deleted Node's slices garbage-collected", func() bool {
		return strings.TrimSpace(d.kubectl(t, "get", "noderesourceslices", "--field-selector", "spec.nodeName="+nodeName, "-o", "name")) == ""
	})
}
