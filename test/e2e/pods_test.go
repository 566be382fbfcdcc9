package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPodsRunInRunc: allot up with its scheduler and local runc node runs a
// busybox pod that reads an env var and a file from a CDI-injected mount;
// allot logs and kubectl logs show both; the pod Succeeds; delete works. A
// pod with an unmatched node selector stays Pending and allot explain names
// the selector.
func TestPodsRunInRunc(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	cdiDir, hostFile := t.TempDir(), filepath.Join(t.TempDir(), "hello.txt")
	if err := os.WriteFile(hostFile, []byte("hello from a CDI mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`cdiVersion: "0.6.0"
kind: example.com/gpu
devices:
- name: gpu0
  containerEdits:
    env: ["GPU_NAME=gpu0"]
    mounts:
    - {hostPath: %q, containerPath: /data/hello.txt, options: [ro, bind]}
`, hostFile)
	if err := os.WriteFile(filepath.Join(cdiDir, "example.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	c.start(t, "--disable", "", "--node-name", "e2e-runc", "--cdi-spec-dir", cdiDir, "--device-plugin-dir", t.TempDir(), "--plugins-registry-dir", "",
		"--pod-resources-socket", filepath.Join(t.TempDir(), "pod-resources.sock"),
		"--heartbeat-interval", "500ms", "--relist-interval", "200ms")
	t.Cleanup(func() { c.deleteAllPods(t) })
	c.applyYAML(t, `apiVersion: v1
kind: Pod
metadata:
  name: cdi-reader
  annotations: {cdi.k8s.io/gpu: example.com/gpu=gpu0}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo GPU_NAME=$GPU_NAME; cat /data/hello.txt"]
---
apiVersion: v1
kind: Pod
metadata: {name: nowhere}
spec:
  nodeSelector: {accelerator: tpu}
  containers: [{name: main, image: busybox}]
`)
	waitFor(t, "cdi-reader Succeeded", func() bool {
		return c.jsonpath(t, "{.status.phase}", "pod", "cdi-reader") == "Succeeded"
	})
	for name, out := range map[string]string{
		"allot logs":   c.allot(t, "logs", "cdi-reader"),
		"kubectl logs": c.kubectl(t, "logs", "cdi-reader"),
	} {
		requireContains(t, name, out, "GPU_NAME=gpu0", "hello from a CDI mount")
	}
	if node := c.jsonpath(t, "{.spec.nodeName}", "pod", "cdi-reader"); node != "e2e-runc" {
		t.Fatalf("cdi-reader ran on %q, want e2e-runc", node)
	}

	waitFor(t, "nowhere marked unschedulable", func() bool {
		return strings.Contains(c.jsonpath(t, "{.status.conditions[0].reason}", "pod", "nowhere"), "Unschedulable")
	})
	requireContains(t, "allot explain", c.allot(t, "explain", "pod", "nowhere"), "NodeAffinity", "accelerator=tpu")
	if phase := c.jsonpath(t, "{.status.phase}", "pod", "nowhere"); phase != "Pending" {
		t.Fatalf("nowhere is %s, want Pending", phase)
	}
	c.allot(t, "delete", "pod", "cdi-reader", "--timeout", "60s")
}

// TestNodeAgentKill9AdoptsContainers: kill -9 the node agent while a pod
// runs; restart it; the container was not restarted and the pod stays
// Running.
func TestNodeAgentKill9AdoptsContainers(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", "kill-node")
	root := t.TempDir()
	agent := c.startNode(t, "kill-node", "runc", root)
	t.Cleanup(func() { c.deleteAllPods(t) })
	c.applyYAML(t, `apiVersion: v1
kind: Pod
metadata: {name: long}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox, command: ["sleep", "1000"]}]
`)
	waitFor(t, "long Running", func() bool { return c.jsonpath(t, "{.status.phase}", "pod", "long") == "Running" })
	started := c.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "long")
	id := c.jsonpath(t, "{.status.containerStatuses[0].containerID}", "pod", "long")

	agent.Kill() // SIGKILL to the agent alone
	c.startNode(t, "kill-node", "runc", root)
	time.Sleep(2 * time.Second) // several relists and resyncs of the new agent
	waitFor(t, "long still Running after the agent restart", func() bool {
		return c.jsonpath(t, "{.status.phase}", "pod", "long") == "Running"
	})
	if got := c.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "long"); got != started {
		t.Fatalf("container restarted: startedAt %s, was %s", got, started)
	}
	if got := c.jsonpath(t, "{.status.containerStatuses[0].containerID}", "pod", "long"); got != id {
		t.Fatalf("container replaced: id %s, was %s", got, id)
	}
	if n := c.jsonpath(t, "{.status.containerStatuses[0].restartCount}", "pod", "long"); n != "0" {
		t.Fatalf("restartCount = %s, want 0", n)
	}
	c.allot(t, "delete", "pod", "long", "--timeout", "60s")
}

// TestMultiNodeSpread: two allot node processes on separate root dirs; the
// least-allocated score spreads pods across them.
func TestMultiNodeSpread(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", "spread-a,spread-b")
	for _, n := range []string{"spread-a", "spread-b"} {
		c.startNode(t, n, "fake", t.TempDir(), "--capacity", "cpu=4,memory=8Gi")
	}
	t.Cleanup(func() { c.deleteAllPods(t) })
	var b strings.Builder
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: spread-%d}
spec:
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "1"}}}]
`, i)
	}
	waitFor(t, "both nodes Ready", func() bool {
		return strings.Count(c.kubectl(t, "get", "nodes"), " Ready ") == 2
	})
	c.applyYAML(t, b.String())
	waitFor(t, "4 pods Running", func() bool {
		return strings.Count(c.kubectl(t, "get", "pods", "--no-headers"), "Running") == 4
	})
	out := c.kubectl(t, "get", "pods", "-o", "custom-columns=NODE:.spec.nodeName", "--no-headers")
	if a, b := strings.Count(out, "spread-a"), strings.Count(out, "spread-b"); a != 2 || b != 2 {
		t.Fatalf("pods per node: spread-a %d, spread-b %d; want 2 and 2\n%s", a, b, out)
	}
}

// startNode runs `allot node` as its own process with the admin kubeconfig
// and stops it (SIGTERM to its group) at cleanup.
func (c *cluster) startNode(t *testing.T, name, runtime, root string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"node", "--name", name, "--kubeconfig", c.kubeconfig, "--runtime", runtime,
		"--root-dir", root, "--listen", "127.0.0.1:0", "--node-ip", "127.0.0.1", "--device-plugin-dir", filepath.Join(root, "device-plugins"),
		"--plugins-registry-dir", filepath.Join(root, "plugins_registry"),
		"--pod-resources-socket", filepath.Join(root, "pod-resources.sock"),
		"--heartbeat-interval", "500ms", "--relist-interval", "200ms"}, extra...)
	p, err := startProc("allot node "+name, childEnv(c.home), allotBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("allot node %s (pid %d) stderr:\n%s", name, p.PID(), tail(p.Stderr.String(), 8000))
		}
		_, _ = p.Terminate(stopGrace)
	})
	return p
}

// deleteAllPods deletes the test's pods and waits until their nodes have
// stopped and removed the containers.
func (c *cluster) deleteAllPods(t *testing.T) {
	if c.p == nil || c.p.Exited() {
		return
	}
	if _, stderr, err := c.runKubectl("delete", "pods", "--all", "--wait=true", "--timeout=90s"); err != nil {
		t.Logf("delete pods: %v: %s", err, stderr)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("runc containers need root; CI runs as root")
		}
		t.Skip("runc containers need root")
	}
}
