package hosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/pkg/client"
	"allot.dev/allot/test/internal/testproc"
)

// cluster is a control plane in the test's network namespace (the API
// server on the bridge's address with its embedded etcd, two schedulers
// and two controller managers with leader election, the fabric driver's
// controller) and a node per host, each node agent and its drivers inside
// the host's namespace. Every process is a child of the test in its own
// process group; cleanup stops them by PID, nodes first.
type cluster struct {
	net   *network
	dir   string // short: unix socket paths must fit
	data  string // the API server's data dir (tokens, CA, kubeconfig)
	env   []string
	url   string
	admin *client.Client
	pools string // fabric.example.com's pools file

	apiserver  *component
	schedulers []*component
	managers   []*component
	fabricCtl  *component
	nodes      []*node
	all        []*component
	fence      []string // the node agents' fence flags
}

// component is one process the test may kill and start again with the
// same flags; its stderr goes to a log file kept across restarts.
type component struct {
	name string
	argv []string
	log  string

	mu sync.Mutex
	p  *testproc.Proc
	// down is set while the test holds the component down (killed, its
	// standby taking over); exits counts the times it exited on its own
	// and the supervisor started it again.
	down  bool
	exits int
}

func (comp *component) restarts() int {
	comp.mu.Lock()
	defer comp.mu.Unlock()
	return comp.exits
}

func (comp *component) proc() *testproc.Proc {
	comp.mu.Lock()
	defer comp.mu.Unlock()
	return comp.p
}

// node is one host's node agent (runc runtime) with the example drivers
// gpu.example.com (node-local devices) and fabric.example.com's kubelet
// plugin (units of a pool other nodes reach too).
type node struct {
	name   string
	host   *host
	root   string
	state  string // gpu.example.com's --state-file
	attach string // fabric.example.com's --attach-dir
	agent  *component
	gpu    *component
	fabric *component
}

// hostLabel names the host a node runs on, for pods' node selectors.
const hostLabel = "hosts.allot.dev/host"

// gpuModel is each node's gpu.example.com inventory: two whole GPUs.
const gpuModel = `partitionable:
  resourceInstances:
  - name: gpu-0
    attributes:
    - {name: memory, quantity: 16Gi}
  - name: gpu-1
    attributes:
    - {name: memory, quantity: 16Gi}
`

// fabricPools is fabric.example.com's one pool of two units, reachable
// from every node (all are in rack r1): a unit freed on one node can be
// attached on another.
const fabricPools = `pools:
- name: shared
  model: fpga-a
  capacity: 2
  nodeSelector:
    fabric.example.com/rack: r1
`

// startCluster makes n hosts and starts everything; it returns once every
// node is Ready with both drivers' slices and both leases are held.
func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "hosts")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir, data: filepath.Join(dir, "api"), env: testproc.ChildEnv(filepath.Join(dir, "home"))}
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(t)
		}
		os.RemoveAll(dir)
	})
	c.net = newNetwork(t, n)
	t.Cleanup(func() { c.stop(t) }) // before the network goes (cleanups run last first)
	listen := net2(c.net.gw, freePort(t, c.net.gw))
	c.apiserver = c.start(t, "apiserver", allotBin, "apiserver", "--data-dir", c.data, "--listen", listen)
	line, _, err := c.apiserver.proc().Stdout.WaitFor(0, time.Minute, func(s string) bool {
		return strings.HasPrefix(s, "allot API server listening on ")
	})
	if err != nil {
		t.Fatalf("API server: %v", err)
	}
	c.url = strings.TrimPrefix(line, "allot API server listening on ")
	if c.admin, err = client.NewForKubeconfig(filepath.Join(c.data, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	c.pools = c.writeFile(t, "pools.yaml", fabricPools)
	model := c.writeFile(t, "model.yaml", gpuModel)
	c.allot(t, "apply", "--kubeconfig", filepath.Join(c.data, "kubeconfig"), "-f", filepath.Join(moduleRoot(t), "examples/fabric-driver/deploy"))

	var managerFence []string
	c.fence, managerFence = fenceFlags()
	schedKC, cmKC := c.token(t, "scheduler", "scheduler"), c.token(t, "controller-manager", "controller-manager")
	for i := range 2 {
		c.schedulers = append(c.schedulers, c.start(t, fmt.Sprintf("scheduler-%d", i), allotBin, append([]string{"scheduler",
			"--kubeconfig", schedKC, "--leader-elect", "--leader-elect-identity", fmt.Sprintf("scheduler-%d", i)}, tm.scheduler...)...))
		c.managers = append(c.managers, c.start(t, fmt.Sprintf("controller-manager-%d", i), allotBin, append([]string{"controller-manager",
			"--kubeconfig", cmKC, "--leader-elect", "--leader-elect-identity", fmt.Sprintf("controller-manager-%d", i)},
			append(append([]string{}, tm.manager...), managerFence...)...)...))
	}
	c.supervise(t)
	c.fabricCtl = c.start(t, "fabric-controller", allotBin, "example", "fabric-controller",
		"--kubeconfig", c.token(t, "driver", "fabric.example.com"), "--config", c.pools,
		"--resync", "2s", "--min-retry-delay", "100ms", "--max-retry-delay", "500ms")
	for _, h := range c.net.hosts {
		c.nodes = append(c.nodes, c.startNode(t, h, model))
	}
	c.waitNodesReady(t)
	c.waitLeader(t, "allot-scheduler", "")
	c.waitLeader(t, "allot-controller-manager", "")
	return c
}

// startNode starts host h's node agent and drivers inside its namespace.
// The agent reaches the API server over the veth with a node token and
// the cluster's CA (the kubeconfig `allot token create` writes), as an
// agent on another machine joins.
func (c *cluster) startNode(t *testing.T, h *host, model string) *node {
	t.Helper()
	name := fmt.Sprintf("h%d", h.index)
	root := filepath.Join(c.dir, name)
	n := &node{name: name, host: h, root: root, state: filepath.Join(root, "gpu-state"), attach: filepath.Join(root, "attached")}
	reg, cdi := filepath.Join(root, "reg"), filepath.Join(root, "cdi")
	for _, d := range []string{reg, cdi} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kc := c.token(t, "node", name)
	args := []string{"node", "--name", name, "--kubeconfig", kc,
		"--runtime", "runc", "--root-dir", root, "--listen", net2(h.ip, 0), "--node-ip", h.ip,
		"--node-labels", hostLabel + "=" + name + ",fabric.example.com/rack=r1", "--capacity", "cpu=4,memory=8Gi",
		"--device-plugin-dir", filepath.Join(root, "dp"), "--plugins-registry-dir", reg,
		"--pod-resources-socket", filepath.Join(root, "pr.sock"), "--cdi-spec-dir", cdi,
		"--stop-containers-on-exit"}
	args = append(append(args, tm.agent...), c.fence...)
	n.agent = c.start(t, name+"-agent", "nsenter", h.command(allotBin, args...)...)
	n.gpu = c.start(t, name+"-gpu-driver", "nsenter", h.command(allotBin, "example", "gpu-driver", "--config", model,
		"--plugins-registry-dir", reg, "--plugin-dir", filepath.Join(root, "gpu"), "--cdi-dir", cdi, "--state-file", n.state)...)
	n.fabric = c.start(t, name+"-fabric-plugin", "nsenter", h.command(allotBin, "example", "fabric-plugin", "--config", c.pools,
		"--plugins-registry-dir", reg, "--plugin-dir", filepath.Join(root, "fab"), "--cdi-dir", cdi, "--attach-dir", n.attach)...)
	return n
}

// start runs a component and registers it for cleanup.
func (c *cluster) start(t *testing.T, name, bin string, args ...string) *component {
	t.Helper()
	comp := &component{name: name, argv: append([]string{bin}, args...), log: filepath.Join(c.dir, name+".log")}
	c.all = append(c.all, comp)
	c.restart(t, comp)
	return comp
}

// restart starts a component's process again with the same flags.
func (c *cluster) restart(t *testing.T, comp *component) {
	t.Helper()
	if err := c.startProc(comp); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) startProc(comp *component) error {
	p, err := testproc.StartLogged(comp.name, c.env, comp.log, comp.argv[0], comp.argv[1:]...)
	if err != nil {
		return err
	}
	comp.mu.Lock()
	comp.p, comp.down = p, false
	comp.mu.Unlock()
	return nil
}

// supervise starts again, as systemd would, a scheduler or controller
// manager that exited on its own and is not held down: a leader that
// cannot renew its Lease within the renew deadline (500ms here, which a
// loaded machine can miss) exits by design.
func (c *cluster) supervise(t *testing.T) {
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-sctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, comp := range append(append([]*component{}, c.schedulers...), c.managers...) {
				comp.mu.Lock()
				exited := !comp.down && comp.p != nil && comp.p.Exited()
				if exited {
					comp.exits++
				}
				comp.mu.Unlock()
				if exited {
					if err := c.startProc(comp); err != nil {
						t.Errorf("restart %s: %v", comp.name, err)
					}
				}
			}
		}
	}()
}

// stop ends every component, the last started first: nodes (they stop
// their containers, --stop-containers-on-exit) before the control plane.
// Then, in case an agent could not (killed after the grace period), it
// removes what is left in the nodes' own runc roots and mounts under
// their root dirs.
func (c *cluster) stop(t *testing.T) {
	for i := len(c.all) - 1; i >= 0; i-- {
		if p := c.all[i].proc(); p != nil {
			_, _ = p.Terminate(10 * time.Second)
		}
	}
	for _, n := range c.nodes {
		n.removeLeftovers(t)
	}
}

// removeLeftovers deletes, by force, the containers left in the node's
// runc root (ROOT/runc, which only this node uses: an agent stopping with
// --stop-containers-on-exit stops its containers and keeps their records
// for its next start) and detaches the mounts under its root dir (none
// after a clean stop).
func (n *node) removeLeftovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runcRoot := filepath.Join(n.root, "runc")
	out, err := exec.CommandContext(ctx, "runc", "--root", runcRoot, "list", "-q").Output()
	if err != nil {
		t.Logf("cleanup: runc list on %s: %v", n.name, err)
	}
	for _, id := range strings.Fields(string(out)) {
		if out, err := exec.CommandContext(ctx, "runc", "--root", runcRoot, "delete", "--force", id).CombinedOutput(); err != nil {
			t.Logf("cleanup: runc delete --force %s: %v: %s", id, err, out)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	var under []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], n.root+"/") {
			under = append(under, f[4])
		}
	}
	for i := len(under) - 1; i >= 0; i-- { // the last mounted first
		t.Logf("cleanup: mount %s left on %s", under[i], n.name)
		if err := syscall.Unmount(under[i], syscall.MNT_DETACH); err != nil {
			t.Logf("cleanup: unmount %s: %v", under[i], err)
		}
	}
}

// logTails logs the end of every component's log.
func (c *cluster) logTails(t *testing.T) {
	for _, comp := range c.all {
		data, err := os.ReadFile(comp.log)
		if err != nil {
			continue
		}
		t.Logf("%s log:\n%s", comp.name, testproc.Tail(string(data), 60000))
	}
}

// token creates a token of role for name and returns the kubeconfig
// `allot token create` wrote for it (the API server's URL and CA).
func (c *cluster) token(t *testing.T, role, name string) string {
	t.Helper()
	path := filepath.Join(c.dir, strings.NewReplacer("@", "-", ".", "-").Replace(role+"-"+name)+".kubeconfig")
	c.allot(t, "token", "create", "--data-dir", c.data, "--role", role, "--name", name, "--kubeconfig", path)
	return path
}

// allot runs a short allot command in the test's namespace.
func (c *cluster) allot(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, allotBin, args...)
	cmd.Env = c.env
	cmd.SysProcAttr = testproc.SysProcAttr()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("allot %s: %v: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("allot %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func (c *cluster) writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitNodesReady waits until every node is Ready, untainted, with both
// drivers' slices published.
func (c *cluster) waitNodesReady(t *testing.T) {
	t.Helper()
	for _, n := range c.nodes {
		c.waitNodeReady(t, n)
	}
}

// waitNodeReady waits until the node is Ready without NoExecute taints
// and has both drivers' slices.
func (c *cluster) waitNodeReady(t *testing.T, n *node) {
	t.Helper()
	waitFor(t, 90*time.Second, "node "+n.name+" Ready and untainted with its slices", func() bool {
		node, err := c.admin.Nodes().Get(ctx(t), n.name)
		if err != nil || !nodeReady(node) || len(node.Spec.Taints) > 0 {
			return false
		}
		slices, err := c.admin.NodeResourceSlices().List(ctx(t), metav1.ListOptions{})
		if err != nil {
			return false
		}
		drivers := map[string]bool{}
		for _, s := range slices.Items {
			if s.Spec.NodeName == n.name {
				drivers[s.Spec.DriverName] = true
			}
		}
		return drivers["gpu.example.com"] && drivers["fabric.example.com"]
	})
}

// leader is the holder of a leader election Lease, "" when none.
func (c *cluster) leader(t *testing.T, lease string) string {
	l, err := c.admin.Leases("kube-system").Get(ctx(t), lease)
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitLeader waits until the Lease is held by a replica other than not
// and returns its identity.
func (c *cluster) waitLeader(t *testing.T, lease, not string) string {
	t.Helper()
	var holder string
	waitFor(t, 60*time.Second, "a leader of "+lease+" other than "+strconv.Quote(not), func() bool {
		holder = c.leader(t, lease)
		return holder != "" && holder != not
	})
	return holder
}

func net2(host string, port int) string { return host + ":" + strconv.Itoa(port) }

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
