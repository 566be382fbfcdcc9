package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGPUDriverKubeletMode runs allot's own example driver in the SDK's
// kubelet mode (`allot example gpu-driver --publish=v1`, issue 19 point 7)
// beside an `allot node` with runc: it registers through the kubelet's
// DRA API, publishes its built-in v1 model as resource.k8s.io/v1
// ResourceSlices of the node with a node-driver token, a pod with a v1
// claim from a template gets its CDI device (the claim's opaque
// configuration included), and deleting the pod unprepares the claim.
func TestGPUDriverKubeletMode(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	const nodeName, ns = "kubelet-mode-gpu", "kmode"
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", nodeName)
	sock, err := os.MkdirTemp("", "kdra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	root := t.TempDir()
	registry, cdiDir, stateFile := filepath.Join(sock, "reg"), filepath.Join(sock, "cdi"), filepath.Join(root, "driver-state")
	for _, dir := range []string{registry, cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	node := c.startNode(t, nodeName, "runc", root, "--plugins-registry-dir", registry, "--cdi-spec-dir", cdiDir,
		"--dra-slice-grace-period", "2s", "--dra-prepare-backoff-initial", "100ms", "--dra-prepare-backoff-max", "500ms",
		"--admit-retry-interval", "200ms", "--terminated-pod-cleanup", "200ms")
	kubeconfig := c.tokenKubeconfig(t, "node-driver", "gpu.example.com@"+nodeName)
	driver, err := startProc("gpu driver (kubelet mode)", childEnv(c.home), allotBin, "example", "gpu-driver", "--publish=v1",
		"--node-name", nodeName, "--kubeconfig", kubeconfig, "--plugins-registry-dir", registry,
		"--plugin-dir", filepath.Join(sock, "gpu"), "--cdi-dir", cdiDir, "--state-file", stateFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The pods first, while the driver runs to unprepare their claims.
		if _, stderr, err := c.runKubectl("delete", "pods", "--all", "--all-namespaces", "--wait=true", "--timeout=90s"); err != nil {
			t.Logf("delete pods: %v: %s", err, stderr)
		}
		if t.Failed() {
			t.Logf("gpu driver (pid %d) stderr:\n%s", driver.PID(), tail(driver.Stderr.String(), 6000))
		}
		_, _ = driver.Terminate(stopGrace)
	})

	// Registered through the kubelet's API.
	waitFor(t, "the driver registered with the node agent through v1.DRAPlugin", func() bool {
		for _, l := range strings.Split(node.Stderr.String(), "\n") {
			if strings.Contains(l, `msg="DRA driver registered"`) && strings.Contains(l, "driver=gpu.example.com ") &&
				strings.Contains(l, "service=v1.DRAPlugin") {
				return true
			}
		}
		return false
	})

	// The built-in v1 model as one v1 ResourceSlice of the node, owned by
	// the Node, in the pool named after it; no NodeResourceSlice.
	const sliceFields = `{range .items[?(@.spec.driver=="gpu.example.com")]}` +
		`{.spec.nodeName} {.spec.pool.name} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.spec.devices[*].name}{"\n"}{end}`
	want := nodeName + " " + nodeName + " Node/" + nodeName + " gpu-0 gpu-1"
	var slices string
	waitFor(t, "the driver's v1 ResourceSlice", func() bool {
		slices = strings.TrimSpace(c.jsonpath(t, sliceFields, "resourceslices"))
		return slices == want
	})
	if mem := c.jsonpath(t, `{.items[?(@.spec.driver=="gpu.example.com")].spec.devices[1].capacity.memory.value}`, "resourceslices"); mem != "32Gi" {
		t.Errorf("gpu-1 capacity memory %q, want 32Gi", mem)
	}
	if seeds := c.jsonpath(t, "{.items[*].spec.nodeName}", "noderesourceslices"); strings.Contains(seeds, nodeName) {
		t.Errorf("a NodeResourceSlice of %s exists (%q): the driver publishes v1 slices only", nodeName, seeds)
	}

	// A v1 claim for a 32Gi GPU, with the driver's opaque configuration.
	c.applyYAML(t, namespace(ns)+`---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu-kubelet-mode}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big-gpu, namespace: `+ns+`}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu-kubelet-mode
          selectors:
          - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0'}
      config:
      - requests: [gpu]
        opaque:
          driver: gpu.example.com
          parameters: {apiVersion: gpu.example.com/v1alpha1, kind: GpuClaimParameters, spec: {sharing: {strategy: MPS}}}
`)
	c.applyYAML(t, draPod(ns, "user", "  - name: gpu\n    resourceClaimTemplateName: big-gpu", "main"))
	var claim string
	waitFor(t, "the pod's claim", func() bool {
		claim = c.jsonpath(t, "{.status.resourceClaimStatuses[0].resourceClaimName}", "pod", "user", "-n", ns)
		return claim != ""
	})
	line := c.logLine(t, ns, "user", "main")
	if want := "main sees gpu-1 " + ns + "/" + claim + " MPS"; line != want {
		t.Errorf("the container sees %q, want %q", line, want)
	}
	if got := c.jsonpath(t, "{.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}",
		"resourceclaim", claim, "-n", ns); got != nodeName+"/gpu-1" {
		t.Errorf("claim allocated %q, want %s/gpu-1", got, nodeName)
	}
	uid := c.jsonpath(t, "{.metadata.uid}", "resourceclaim", claim, "-n", ns)
	spec := filepath.Join(cdiDir, "gpu.example.com-gpu_"+uid+".json")
	if _, err := os.Stat(spec); err != nil {
		t.Errorf("the claim's CDI spec: %v", err)
	}
	if n := stateFileLines(t, stateFile, "prepare", uid); n != 1 {
		t.Errorf("claim prepared %d times, want 1", n)
	}

	// Deleting the pod unprepares the claim.
	c.kubectl(t, "delete", "pod", "user", "-n", ns, "--wait=true", "--timeout=60s")
	waitFor(t, "the claim unprepared", func() bool { return stateFileLines(t, stateFile, "unprepare", uid) == 1 })
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Errorf("the claim's CDI spec after unprepare: %v", err)
	}
}
