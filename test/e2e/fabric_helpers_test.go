package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rackLabel is the node label the pools of testdata/fabric-pools.yaml
// select on.
const rackLabel = "fabric.example.com/rack"

// fabricCluster is allot up (API server, controller manager, scheduler)
// with separate `allot node` processes on the fake runtime, one kubelet
// plugin of the control-plane driver fabric.example.com per node, and the
// driver's controller on a driver token, all with the pools of
// testdata/fabric-pools.yaml and the driver's CRD and class applied.
type fabricCluster struct {
	*cluster
	pools    string // the pools file, shared by the controller and the plugins
	sock     string // short directory for the nodes' sockets
	driverKC string // kubeconfig with the driver token
	nodes    map[string]*fabricNode
	ctl      *proc // the running controller
}

// fabricNode is one node agent and its fabric.example.com plugin.
type fabricNode struct {
	name, rack string
	root       string
	attachDir  string // the plugin's --attach-dir
	agent      *proc
	plugin     *proc
}

// fabricUpArgs are the scheduler's short back-offs; tests add their own
// flags after them.
var fabricUpArgs = []string{"--pod-initial-backoff", "100ms", "--pod-max-backoff", "500ms"}

// newFabricCluster starts allot up without a local node (node tokens for
// nodeNames) and applies the driver's CRD and class. upArgs are extra
// flags of allot up. Nodes and the controller are started by the test.
func newFabricCluster(t *testing.T, upArgs []string, nodeNames ...string) *fabricCluster {
	t.Helper()
	c := newCluster(t)
	c.start(t, append(append([]string{"--disable", "node", "--node-name", strings.Join(nodeNames, ",")}, fabricUpArgs...), upArgs...)...)
	sock, err := os.MkdirTemp("", "fab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	pools, err := filepath.Abs(filepath.Join("testdata", "fabric-pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fabricCluster{cluster: c, pools: pools, sock: sock, nodes: map[string]*fabricNode{}}
	c.kubectl(t, "apply", "-f", filepath.Join(repoRoot(t), "examples/fabric-driver/deploy"))
	f.driverKC = f.driverKubeconfig(t)
	return f
}

// driverKubeconfig writes a copy of the admin kubeconfig whose token is a
// new driver token for fabric.example.com, and waits until the server
// accepts it.
func (f *fabricCluster) driverKubeconfig(t *testing.T) string {
	t.Helper()
	tok := strings.TrimSpace(f.allot(t, "token", "create", "--data-dir", f.dataDir, "--role", "driver", "--name", "fabric.example.com"))
	kc, err := os.ReadFile(f.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(\s*token: ).*$`)
	if !re.Match(kc) {
		t.Fatalf("no token line in %s", f.kubeconfig)
	}
	path := filepath.Join(f.sock, "driver.kubeconfig")
	if err := os.WriteFile(path, re.ReplaceAll(kc, []byte("${1}"+tok)), 0o600); err != nil {
		t.Fatal(err)
	}
	waitAccepted(t, f.cluster, "--kubeconfig", path, "get", "podschedulingcontexts", "-A")
	return path
}

// addNode starts a node agent (fake runtime) labelled with rack, with
// capacity overrides (for example "cpu=2"), and its fabric.example.com
// plugin; it waits until the node is Ready and the plugin registered
// (the node publishes the driver's NodeResourceSlice). At cleanup the
// pods are deleted while the plugin still runs to unprepare their claims,
// then the plugin and the agent stop.
func (f *fabricCluster) addNode(t *testing.T, name, rack, capacity string) *fabricNode {
	t.Helper()
	n := &fabricNode{name: name, rack: rack, root: t.TempDir()}
	n.attachDir = filepath.Join(n.root, "attached")
	dir := filepath.Join(f.sock, name)
	registry := filepath.Join(dir, "reg")
	for _, d := range []string{registry, filepath.Join(n.root, "cdi")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.agent = f.startNode(t, name, "fake", n.root, "--node-labels", rackLabel+"="+rack, "--capacity", capacity,
		"--plugins-registry-dir", registry, "--dra-slice-grace-period", "2s",
		"--dra-prepare-backoff-initial", "100ms", "--dra-prepare-backoff-max", "500ms",
		"--admit-retry-interval", "200ms", "--terminated-pod-cleanup", "200ms")
	p, err := startProc("fabric plugin "+name, childEnv(f.home), allotBin, "example", "fabric-plugin", "--verbose",
		"--config", f.pools, "--plugins-registry-dir", registry, "--plugin-dir", filepath.Join(dir, "p"),
		"--cdi-dir", filepath.Join(n.root, "cdi"), "--attach-dir", n.attachDir)
	if err != nil {
		t.Fatal(err)
	}
	n.plugin = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fabric plugin %s (pid %d) stderr:\n%s", name, p.PID(), tail(p.Stderr.String(), 4000))
		}
		_, _ = p.Terminate(stopGrace)
	})
	t.Cleanup(func() { f.deleteAllPods(t) }) // runs first: the plugin unprepares, the agent removes the containers
	f.nodes[name] = n
	waitFor(t, "node "+name+" Ready with the fabric.example.com slice", func() bool {
		// The node may not be registered yet.
		ready, _, err := f.runKubectl("get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil || ready != "True" {
			return false
		}
		slices := f.kubectl(t, "get", "noderesourceslices", "-o", `jsonpath={range .items[*]}{.spec.nodeName}/{.spec.driverName}{"\n"}{end}`)
		return strings.Contains(slices, name+"/fabric.example.com")
	})
	return n
}

// startController starts the driver's controller with the pools file, a
// driver token and sub-second retries; it is stopped at cleanup (after a
// SIGCONT, in case the test left it stopped).
func (f *fabricCluster) startController(t *testing.T) *proc {
	t.Helper()
	p, err := startProc("fabric controller", childEnv(f.home), allotBin, "example", "fabric-controller", "--verbose",
		"--kubeconfig", f.driverKC, "--config", f.pools,
		"--resync", "2s", "--min-retry-delay", "100ms", "--max-retry-delay", "500ms")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fabric controller (pid %d) stderr:\n%s", p.PID(), tail(p.Stderr.String(), 12000))
		}
		if !p.Exited() {
			_ = syscall.Kill(p.PID(), syscall.SIGCONT) // a paused controller handles SIGTERM
		}
		_, _ = p.Terminate(stopGrace)
	})
	f.ctl = p
	return p
}

// pause stops the controller (SIGSTOP): it keeps its connections and
// answers nothing, like a hung driver.
func (f *fabricCluster) pause(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(f.ctl.PID(), syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP fabric controller (pid %d): %v", f.ctl.PID(), err)
	}
}

// resume continues a paused controller.
func (f *fabricCluster) resume(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(f.ctl.PID(), syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT fabric controller (pid %d): %v", f.ctl.PID(), err)
	}
}

func (f *fabricCluster) phase(t *testing.T, pod string) string {
	return f.jsonpath(t, "{.status.phase}", "pod", pod)
}

func (f *fabricCluster) podNode(t *testing.T, pod string) string {
	return f.jsonpath(t, "{.spec.nodeName}", "pod", pod)
}

// scheduledMessage is the message of the pod's PodScheduled condition.
func (f *fabricCluster) scheduledMessage(t *testing.T, pod string) string {
	return f.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].message}`, "pod", pod)
}

// events returns the messages of the events of an object, one per line.
func (f *fabricCluster) events(t *testing.T, name string) string {
	return f.kubectl(t, "get", "events", "--field-selector", "involvedObject.name="+name,
		"-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
}

// podClaim waits for the name of the claim generated for the pod's
// "fabric" entry.
func (f *fabricCluster) podClaim(t *testing.T, pod string) string {
	t.Helper()
	var name string
	waitFor(t, "pod "+pod+"'s claim name", func() bool {
		name = f.jsonpath(t, "{.status.resourceClaimStatuses[0].resourceClaimName}", "pod", pod)
		return name != ""
	})
	return name
}

// fabricHandle is the allocation's opaque data as the driver writes it.
type fabricHandle struct {
	Pool     string   `json:"pool"`
	Units    []string `json:"units"`
	Fallback bool     `json:"fallback"`
}

// handle returns the claim's allocation handle; ok is false while the
// claim is not allocated.
func (f *fabricCluster) handle(t *testing.T, claim string) (h fabricHandle, ok bool) {
	t.Helper()
	data := f.jsonpath(t, "{.status.allocation.resourceHandles[0].data}", v1alpha2Claims, claim)
	if data == "" {
		return h, false
	}
	if err := json.Unmarshal([]byte(data), &h); err != nil {
		t.Fatalf("claim %s: resource handle %q: %v", claim, data, err)
	}
	return h, true
}

// requireOneUnit checks that the claim is allocated exactly one unit of
// pool and returns the unit.
func (f *fabricCluster) requireOneUnit(t *testing.T, claim, pool string) string {
	t.Helper()
	h, ok := f.handle(t, claim)
	if !ok || h.Pool != pool || len(h.Units) != 1 || h.Fallback {
		t.Fatalf("claim %s allocated %+v (allocated=%v), want one unit of pool %s", claim, h, ok, pool)
	}
	return h.Units[0]
}

// attached lists the units the node's plugin attached for a claim UID.
func (n *fabricNode) attached(t *testing.T, uid string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.attachDir, uid))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var units []string
	for _, e := range entries {
		units = append(units, e.Name())
	}
	slices.Sort(units)
	return units
}

// waitAttached waits until the node's plugin has attached exactly units
// for the claim (the node agent prepared it).
func (f *fabricCluster) waitAttached(t *testing.T, node, claim string, units ...string) {
	t.Helper()
	uid := f.jsonpath(t, "{.metadata.uid}", v1alpha2Claims, claim)
	n := f.nodes[node]
	waitFor(t, fmt.Sprintf("units %v of claim %s attached on %s", units, claim, node), func() bool {
		return slices.Equal(n.attached(t, uid), units)
	})
}

// waitClaimGone waits until a claim no longer exists (its driver
// deallocated it and removed its finalizer).
func (f *fabricCluster) waitClaimGone(t *testing.T, claim string) {
	t.Helper()
	waitFor(t, "claim "+claim+" deleted", func() bool {
		_, stderr, err := f.runKubectl("get", v1alpha2Claims, claim)
		return err != nil && strings.Contains(stderr, "NotFound")
	})
}

// fabricParams is a FabricClaimParameters object asking for count units
// of model fpga-a.
func fabricParams(name string, count int) string {
	return fmt.Sprintf(`apiVersion: fabric.example.com/v1alpha1
kind: FabricClaimParameters
metadata: {name: %s}
spec: {count: %d, model: fpga-a}
`, name, count)
}

// fabricClaim is a ResourceClaim of class fabric.example.com with the
// given allocation mode (Immediate or WaitForFirstConsumer).
func fabricClaim(name, params, mode string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: %s}
spec:
  resourceClassName: fabric.example.com
  allocationMode: %s
  parametersRef: {apiGroup: fabric.example.com, kind: FabricClaimParameters, name: %s}
`, name, mode, params)
}

// fabricTemplate is a ResourceClaimTemplate whose claims (allocated when
// their pod is scheduled) use params.
func fabricTemplate(name, params string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimTemplate
metadata: {name: %s}
spec:
  spec:
    resourceClassName: fabric.example.com
    parametersRef: {apiGroup: fabric.example.com, kind: FabricClaimParameters, name: %s}
`, name, params)
}

// fabricPod is a pod requesting one cpu whose container uses the claim
// entry "fabric" with source (for example "resourceClaimTemplateName:
// one"); source "" gives a pod without claims. extra are further spec
// lines, indented by two spaces.
func fabricPod(name, source string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n", name)
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	claims := ""
	if source != "" {
		fmt.Fprintf(&b, "  resourceClaims: [{name: fabric, %s}]\n", source)
		claims = ", claims: [{name: fabric}]"
	}
	fmt.Fprintf(&b, "  containers: [{name: main, image: busybox, resources: {requests: {cpu: \"1\"}%s}}]\n", claims)
	return b.String()
}

// inRack is a node selector line for fabricPod.
func inRack(rack string) string {
	return fmt.Sprintf("nodeSelector: {%s: %s}", rackLabel, rack)
}

// watch runs `kubectl get KIND -w -o jsonpath=EXPR` and returns once the
// watch request has been answered (kubectl -v=6 logs it: `GET URL 200 OK
// in N milliseconds` up to 1.32, `"Response" verb="GET" url="URL"
// status="200 OK"` in 1.37), so that no later change is missed. Cleanup
// kills it.
func (f *fabricCluster) watch(t *testing.T, kind, expr string) *proc {
	t.Helper()
	p := f.kubectlWatch(t, "get", kind, "-w", "-v=6", "-o", "jsonpath="+expr)
	waitFor(t, "kubectl get "+kind+" -w watching", func() bool {
		for _, l := range strings.Split(p.Stderr.String(), "\n") {
			if strings.Contains(l, "watch=true") && (strings.Contains(l, " 200 OK") || strings.Contains(l, `status="200 OK"`)) {
				return true
			}
		}
		return p.Exited()
	})
	if p.Exited() {
		t.Fatalf("kubectl get %s -w exited: %v\n%s", kind, p.Err(), p.Stderr)
	}
	return p
}

// seen reports whether a line of the watch's output contains every part.
func seen(p *proc, parts ...string) bool {
	for _, l := range strings.Split(p.Stdout.String(), "\n") {
		if containsAll(l, parts...) {
			return true
		}
	}
	return false
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// killMidAllocation lets the paused controller run in slices of about a
// millisecond (SIGCONT, SIGSTOP) until the claim watch w shows the
// driver's finalizer on the claim, the first step of an allocation, and
// kills it there (SIGKILL). It reports whether the controller died in the
// middle of the allocation: the claim has the finalizer and no
// allocation. A slice may run longer than asked on a loaded machine and
// the controller may finish the allocation within it.
func (f *fabricCluster) killMidAllocation(t *testing.T, w *proc, claim string) bool {
	t.Helper()
	const finalizer = "fabric.example.com/deletion-protection"
	steps := 0
	waitFor(t, "the controller to protect claim "+claim, func() bool {
		for range 10 {
			steps++
			if err := syscall.Kill(f.ctl.PID(), syscall.SIGCONT); err != nil {
				t.Fatalf("SIGCONT fabric controller: %v", err)
			}
			time.Sleep(500 * time.Microsecond)
			if err := syscall.Kill(f.ctl.PID(), syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP fabric controller: %v", err)
			}
			time.Sleep(10 * time.Millisecond) // the watch shows what the step wrote
			if seen(w, claim+" finalizers=", finalizer) {
				return true
			}
		}
		return false
	})
	f.ctl.Kill()
	fin := f.jsonpath(t, "{.metadata.finalizers}", v1alpha2Claims, claim)
	alloc := f.jsonpath(t, "{.status.allocation.resourceHandles[0].data}", v1alpha2Claims, claim)
	t.Logf("killed the controller in step %d; claim %s: finalizers %s, allocation %q", steps, claim, fin, alloc)
	return strings.Contains(fin, finalizer) && alloc == ""
}

// unitsOf is the sorted units of claims, each allocated one unit of pool.
func (f *fabricCluster) unitsOf(t *testing.T, pool string, claims ...string) []string {
	t.Helper()
	var units []string
	for _, c := range claims {
		units = append(units, f.requireOneUnit(t, c, pool))
	}
	slices.Sort(units)
	return units
}
