package e2e

import (
	"allot.dev/allot/test/internal/testproc"

	"os"
	"path/filepath"
	"strings"
	"testing"
)

// draCluster is allot up (API server, controller manager, scheduler), a
// separate `allot node` with the runc runtime, the example DRA driver
// gpu.example.com and its parameters translator as their own processes,
// and the driver's CRD and class applied.
type draCluster struct {
	*cluster
	nodeName  string
	root      string // the node's root dir
	registry  string // plugins registry dir
	cdiDir    string
	modelFile string
	stateFile string
	node      *proc
	driver    *proc   // the running driver
	drivers   []*proc // every driver started, stopped at cleanup
	driverArg []string
	nodeArgs  []string
}

// draModel is a model of two GPUs: gpu-0 whole-only with 16Gi, and gpu-1
// with two 8Gi halves (or whole, 16Gi), runtime 11.1.42.
const draModel = `partitionable:
  commonAttributes:
  - name: common
    attributes:
    - {name: runtimeVersion, version: "11.1.42"}
    - {name: productName, string: ACME T1000}
  resourceInstances:
  - name: gpu-0
    commonAttributesRefs: [common]
    attributes:
    - {name: memory, quantity: 16Gi}
  - name: gpu-1
    commonAttributesRefs: [common]
    partitions:
    - name: halves
      resourceInstances:
      - name: half-0
        attributes:
        - {name: memory, quantity: 8Gi}
      - name: half-1
        attributes:
        - {name: memory, quantity: 8Gi}
`

// newDRACluster starts everything; driverArgs are extra flags of the
// driver (test knobs), nodeArgs of the node agent.
func newDRACluster(t *testing.T, nodeName, model string, driverArgs, nodeArgs []string) *draCluster {
	t.Helper()
	requireRoot(t)
	c := newCluster(t)
	c.start(t, "--disable", "node", "--node-name", nodeName)
	sock, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	d := &draCluster{cluster: c, nodeName: nodeName, root: t.TempDir(), registry: filepath.Join(sock, "reg"),
		cdiDir: filepath.Join(sock, "cdi"), driverArg: driverArgs}
	d.modelFile = filepath.Join(d.root, "model.yaml")
	d.stateFile = filepath.Join(d.root, "driver-state")
	if err := os.WriteFile(d.modelFile, []byte(model), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{d.registry, d.cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d.nodeArgs = append([]string{"--plugins-registry-dir", d.registry, "--cdi-spec-dir", d.cdiDir,
		"--dra-slice-grace-period", "2s", "--dra-prepare-backoff-initial", "100ms", "--dra-prepare-backoff-max", "500ms",
		"--admit-retry-interval", "200ms", "--terminated-pod-cleanup", "200ms"}, nodeArgs...)
	d.node = c.startNode(t, nodeName, "runc", d.root, d.nodeArgs...)
	c.kubectl(t, "apply", "-f", filepath.Join(repoRoot(t), "examples/gpu-driver/deploy"))
	d.driver = d.startDriver(t)
	d.startTranslator(t)
	t.Cleanup(func() {
		// Pods of every namespace, while the driver still runs to unprepare
		// their claims, so that the node removes their containers (and
		// mounts) before it stops.
		if _, stderr, err := c.runKubectl("delete", "pods", "--all", "--all-namespaces", "--wait=true", "--timeout=90s"); err != nil {
			t.Logf("delete pods: %v: %s", err, stderr)
		}
		for _, p := range d.drivers {
			if t.Failed() {
				t.Logf("gpu driver (pid %d) stderr:\n%s", p.PID(), tail(p.Stderr.String(), 6000))
			}
			_, _ = p.Terminate(stopGrace)
		}
	})
	waitFor(t, "the node's gpu.example.com slice", func() bool {
		return strings.Contains(c.kubectl(t, "get", "noderesourceslices", "-o", "jsonpath={.items[*].spec.nodeName}"), nodeName)
	})
	return d
}

// restartNode starts the node agent again with the same flags.
func (d *draCluster) restartNode(t *testing.T) {
	t.Helper()
	d.node = d.cluster.startNode(t, d.nodeName, "runc", d.root, d.nodeArgs...)
}

func (d *draCluster) startDriver(t *testing.T, extra ...string) *proc {
	t.Helper()
	args := append([]string{"example", "gpu-driver", "--config", d.modelFile, "--plugins-registry-dir", d.registry,
		"--plugin-dir", filepath.Join(filepath.Dir(d.registry), "gpu"), "--cdi-dir", d.cdiDir, "--state-file", d.stateFile},
		append(append([]string{}, d.driverArg...), extra...)...)
	p, err := startProc("gpu driver", childEnv(d.home), allotBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	d.drivers = append(d.drivers, p) // stopped after the pods are deleted
	return p
}

// startTranslator runs the GpuClaimParameters translator with a driver
// token, as a driver vendor would deploy it.
func (d *draCluster) startTranslator(t *testing.T) {
	t.Helper()
	path := d.tokenKubeconfig(t, "driver", "gpu.example.com")
	waitAccepted(t, d.cluster, "--kubeconfig", path, "get", "resourceclaimparameters", "-A")
	p, err := startProc("gpu translator", childEnv(d.home), allotBin, "example", "gpu-translator", "--kubeconfig", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gpu translator (pid %d) stderr:\n%s", p.PID(), tail(p.Stderr.String(), 4000))
		}
		_, _ = p.Terminate(stopGrace)
	})
}

// tokenKubeconfig creates a token of role for name with `allot token
// create --kubeconfig`, as an operator gives a driver its credentials,
// and returns the kubeconfig's path.
func (c *cluster) tokenKubeconfig(t *testing.T, role, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), strings.NewReplacer("@", "-", ".", "-").Replace(name)+".kubeconfig")
	c.allot(t, "token", "create", "--data-dir", c.dataDir, "--role", role, "--name", name, "--kubeconfig", path)
	return path
}

// stateLines counts the driver's state-file lines that start with verb
// ("prepare" or "unprepare") for a claim UID.
func (d *draCluster) stateLines(t *testing.T, verb, uid string) int {
	return stateFileLines(t, d.stateFile, verb, uid)
}

// stateFileLines counts the lines "VERB UID ..." of a driver's state file
// (the example gpu driver's and test/upstreamdriver's); a missing file
// has none.
func stateFileLines(t *testing.T, path, verb, uid string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == verb && f[1] == uid {
			n++
		}
	}
	return n
}

// podClaim is the name of the claim generated for a pod's template entry.
func (d *draCluster) podClaim(t *testing.T, ns, pod string) string {
	t.Helper()
	var name string
	waitFor(t, "pod "+pod+"'s claim name", func() bool {
		name = d.jsonpath(t, "{.status.resourceClaimStatuses[0].resourceClaimName}", "pod", pod, "-n", ns)
		return name != ""
	})
	return name
}

func (d *draCluster) phase(t *testing.T, ns, pod string) string {
	return d.jsonpath(t, "{.status.phase}", "pod", pod, "-n", ns)
}

// repoRoot is the module root (tests run in test/e2e).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
