package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"allot.dev/allot/pkg/client"
	"allot.dev/allot/test/internal/testproc"
)

// component is one allot process of the cluster: it can be killed and is
// restarted with the same flags and data.
type component struct {
	name string
	bin  string // "" for the allot binary
	args []string
	log  string // its stderr, appended across restarts

	// startMu serializes starts: the killer's restart and the
	// supervisor's would otherwise both start a process, and the one not
	// recorded would run on untracked (and unkillable by the killer).
	startMu sync.Mutex

	mu    sync.Mutex
	p     *testproc.Proc
	kills int
	// down is set while the killer holds the component down; exits
	// counts the times it exited on its own (a leader that lost its
	// lease) and was restarted by the supervisor.
	down  bool
	exits int
}

func (c *component) proc() *testproc.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p
}

// cluster is the API server with its embedded etcd, the scheduler, the
// controller manager, node agents each with the example DRA driver
// gpu.example.com, node agents each with test/upstreamdriver (a driver
// built on the upstream kubeletplugin library, upstream.example.com), and
// simulated nodes: every one a process of its own with its own token.
type cluster struct {
	bin, dir, home string
	upstreamBin    string // test/upstreamdriver
	listen         string // the API server's address, kept across restarts
	admin          *client.Client
	adminConfig    string
	env            []string

	apiserver  *component
	components []*component // every component, the API server first
	nodes      []node
}

// node is a node agent and its driver's files.
type node struct {
	name      string
	agent     *component
	driver    *component
	cdiDir    string
	stateFile string
	// upstream marks a node whose driver is test/upstreamdriver: its state
	// file has a line per call ("prepare UID", "unprepare UID"), and its
	// CDI specs are cdiGlob.
	upstream bool
	cdiGlob  string
}

// upstreamDriver is the driver name of test/upstreamdriver, and
// upstreamGPUs how many devices (gpu-0 ...) it publishes on its node.
const (
	upstreamDriver = "upstream.example.com"
	upstreamGPUs   = 3
)

// model is each node's gpu.example.com inventory: gpu-0 whole only (16Gi),
// gpu-1 whole (16Gi) or as two 8Gi halves.
const model = `partitionable:
  resourceInstances:
  - name: gpu-0
    attributes:
    - {name: memory, quantity: 16Gi}
  - name: gpu-1
    attributes:
    - {name: memory, quantity: 16Gi}
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

// devicesPerNode is the most claims one node's model holds at once (gpu-0
// and two halves of gpu-1).
const devicesPerNode = 3

// clusterConfig sizes the cluster.
type clusterConfig struct {
	Nodes, UpstreamNodes, SimNodes int
	// Replicas of the scheduler and the controller manager; above one they
	// run with --leader-elect (2s lease, 1.5s renew deadline, 200ms retry)
	// and only the leader works.
	Replicas int
	// FenceAfter is the node agents' --self-fence-after (0: their default).
	FenceAfter time.Duration
}

// Binaries are the programs a run starts, built beforehand: allot, and
// test/upstreamdriver (needed only with upstream nodes).
type Binaries struct {
	Allot, UpstreamDriver string
}

// startCluster builds nothing. It starts every component and waits until
// the nodes are Ready and have published their slices.
func startCluster(ctx context.Context, bins Binaries, dir string, cfg clusterConfig) (*cluster, error) {
	if cfg.UpstreamNodes > 0 && bins.UpstreamDriver == "" {
		return nil, errors.New("upstream nodes need the test/upstreamdriver binary")
	}
	c := &cluster{bin: bins.Allot, upstreamBin: bins.UpstreamDriver, dir: dir, home: filepath.Join(dir, "home")}
	if err := os.MkdirAll(c.home, 0o755); err != nil {
		return nil, err
	}
	c.env = testproc.ChildEnv(c.home)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c.listen = "127.0.0.1:" + strconv.Itoa(port)
	data := filepath.Join(dir, "apiserver")
	c.apiserver = c.newComponent("apiserver", "apiserver", "--data-dir", data, "--listen", c.listen,
		"--etcd-compaction-interval", "20s")
	if err := c.startAPIServer(ctx); err != nil {
		return nil, err
	}
	c.adminConfig = filepath.Join(data, "kubeconfig")
	if c.admin, err = client.NewForKubeconfig(c.adminConfig); err != nil {
		return nil, err
	}
	kc := func(role, name string) (string, error) { return c.kubeconfig(ctx, data, role, name) }
	schedKC, err := kc("scheduler", "scheduler")
	if err != nil {
		return nil, err
	}
	cmKC, err := kc("controller-manager", "controller-manager")
	if err != nil {
		return nil, err
	}
	var election []string
	if cfg.Replicas > 1 {
		election = []string{"--leader-elect", "--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "200ms"}
	}
	for i := range max(cfg.Replicas, 1) {
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprintf("-%d", i)
		}
		c.newComponent("scheduler"+suffix, append([]string{"scheduler", "--kubeconfig", schedKC,
			"--pod-initial-backoff", "100ms", "--pod-max-backoff", "1s", "--unschedulable-timeout", "5s", "--api-timeout", "5s", "--bind-timeout", "5s"}, election...)...)
		c.newComponent("controller-manager"+suffix, append([]string{"controller-manager", "--kubeconfig", cmKC,
			"--gc-rediscovery", "5s", "--gc-resync", "30s"}, election...)...)
	}
	for i := range cfg.Nodes {
		n, err := c.addNode(ctx, data, fmt.Sprintf("chaos-%d", i), cfg.FenceAfter)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	for i := range cfg.UpstreamNodes {
		n, err := c.addUpstreamNode(ctx, data, fmt.Sprintf("chaos-up-%d", i), cfg.FenceAfter)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	if cfg.SimNodes > 0 {
		tokens, err := c.simTokens(ctx, data, cfg.SimNodes)
		if err != nil {
			return nil, err
		}
		c.newComponent("sim-nodes", "sim-nodes", "--kubeconfig", c.adminConfig, "--token-file", tokens,
			"--count", strconv.Itoa(cfg.SimNodes), "--prefix", "sim", "--capacity", "cpu=8,memory=32Gi")
	}
	for _, comp := range c.components[1:] {
		if err := c.start(comp); err != nil {
			return nil, err
		}
	}
	return c, c.waitReady(ctx, cfg)
}

func (c *cluster) newComponent(name string, args ...string) *component {
	comp := &component{name: name, args: args, log: filepath.Join(c.dir, name+".log")}
	c.components = append(c.components, comp)
	return comp
}

// nodeDirs creates a node's root, plugins registry and CDI directories.
func (c *cluster) nodeDirs(name string) (root, reg, cdi string, err error) {
	root = filepath.Join(c.dir, name)
	reg, cdi = filepath.Join(root, "plugins_registry"), filepath.Join(root, "cdi")
	for _, d := range []string{reg, cdi} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", "", "", err
		}
	}
	return root, reg, cdi, nil
}

// newAgent adds a node agent (fake runtime) with a node token; fenceAfter
// (unless 0) is its --self-fence-after.
func (c *cluster) newAgent(ctx context.Context, data, name, root, reg, cdi string, fenceAfter time.Duration) (*component, error) {
	kc, err := c.kubeconfig(ctx, data, "node", name)
	if err != nil {
		return nil, err
	}
	var extra []string
	if fenceAfter > 0 {
		extra = []string{"--self-fence-after", fenceAfter.String()}
	}
	return c.newComponent(name, append([]string{"node", "--name", name, "--kubeconfig", kc, "--runtime", "fake",
		"--root-dir", root, "--listen", "127.0.0.1:0", "--node-ip", "127.0.0.1",
		"--device-plugin-dir", filepath.Join(root, "device-plugins"), "--plugins-registry-dir", reg,
		"--pod-resources-socket", filepath.Join(root, "pod-resources.sock"), "--cdi-spec-dir", cdi,
		"--heartbeat-interval", "500ms", "--relist-interval", "200ms", "--resync-interval", "2s",
		"--retry-interval", "200ms", "--api-timeout", "5s", "--admit-retry-interval", "200ms",
		"--terminated-pod-cleanup", "200ms", "--dra-slice-grace-period", "5s",
		"--dra-prepare-backoff-initial", "100ms", "--dra-prepare-backoff-max", "1s", "--dra-prepare-timeout", "5s"}, extra...)...), nil
}

// addNode prepares a node agent (fake runtime) and its gpu.example.com
// driver, with a node token.
func (c *cluster) addNode(ctx context.Context, data, name string, fenceAfter time.Duration) (node, error) {
	root, reg, cdi, err := c.nodeDirs(name)
	if err != nil {
		return node{}, err
	}
	n := node{name: name, cdiDir: cdi, cdiGlob: "*", stateFile: filepath.Join(root, "driver-state")}
	modelFile := filepath.Join(root, "model.yaml")
	if err := os.WriteFile(modelFile, []byte(model), 0o644); err != nil {
		return n, err
	}
	if n.agent, err = c.newAgent(ctx, data, name, root, reg, cdi, fenceAfter); err != nil {
		return n, err
	}
	n.driver = c.newComponent(name+"-gpu-driver", "example", "gpu-driver", "--config", modelFile,
		"--plugins-registry-dir", reg, "--plugin-dir", filepath.Join(root, "gpu"), "--cdi-dir", n.cdiDir,
		"--state-file", n.stateFile)
	return n, nil
}

// addUpstreamNode prepares a node agent (fake runtime) and its
// upstream.example.com driver, test/upstreamdriver, started as the e2e
// starts it: a node-driver token upstream.example.com@NODE, its registrar
// directory the agent's plugins registry, its CDI root the agent's CDI
// spec directory.
func (c *cluster) addUpstreamNode(ctx context.Context, data, name string, fenceAfter time.Duration) (node, error) {
	root, reg, cdi, err := c.nodeDirs(name)
	if err != nil {
		return node{}, err
	}
	n := node{name: name, cdiDir: cdi, cdiGlob: upstreamDriver + "-*.json", stateFile: filepath.Join(root, "driver-state"), upstream: true}
	if n.agent, err = c.newAgent(ctx, data, name, root, reg, cdi, fenceAfter); err != nil {
		return n, err
	}
	kc, err := c.kubeconfig(ctx, data, "node-driver", upstreamDriver+"@"+name)
	if err != nil {
		return n, err
	}
	n.driver = c.newComponent(name+"-upstream-driver", "--node-name", name, "--kubeconfig", kc,
		"--kubelet-registrar-directory-path", reg, "--kubelet-plugins-directory-path", filepath.Join(root, "plugins"),
		"--cdi-root", cdi, "--state-file", n.stateFile, "--gpus", strconv.Itoa(upstreamGPUs))
	n.driver.bin = c.upstreamBin
	return n, nil
}

// devices is how many claims the DRA nodes hold at once.
func (c *cluster) devices() int {
	total := 0
	for _, n := range c.nodes {
		if n.upstream {
			total += upstreamGPUs
		} else {
			total += devicesPerNode
		}
	}
	return total
}

// startAPIServer starts the API server and waits until it listens.
func (c *cluster) startAPIServer(ctx context.Context) error {
	if err := c.start(c.apiserver); err != nil {
		return err
	}
	const listening = "allot API server listening on "
	p := c.apiserver.proc()
	if _, _, err := p.Stdout.WaitFor(0, time.Minute, func(s string) bool { return strings.HasPrefix(s, listening) }); err != nil {
		return fmt.Errorf("API server: %w; see %s", err, c.apiserver.log)
	}
	return nil
}

// start runs a component's process.
func (c *cluster) start(comp *component) error {
	bin := comp.bin
	if bin == "" {
		bin = c.bin
	}
	p, err := testproc.StartLogged(comp.name, c.env, comp.log, bin, comp.args...)
	if err != nil {
		return err
	}
	comp.mu.Lock()
	comp.p = p
	comp.mu.Unlock()
	return nil
}

// kill sends SIGKILL to a component's process (not its group: nothing it
// started must die with it) and waits for it.
func (c *cluster) kill(comp *component) {
	comp.mu.Lock()
	comp.kills++
	comp.mu.Unlock()
	c.takeDown(comp)
}

// takeDown is kill without counting a kill (an outage).
func (c *cluster) takeDown(comp *component) {
	comp.mu.Lock()
	comp.down = true
	p := comp.p
	comp.mu.Unlock()
	p.Kill()
}

// restart starts a killed (or crashed) component again.
func (c *cluster) restart(ctx context.Context, comp *component) error {
	comp.startMu.Lock()
	defer comp.startMu.Unlock()
	comp.mu.Lock()
	comp.down = false
	comp.mu.Unlock()
	return c.startIfExited(ctx, comp)
}

// startIfExited starts the component unless its process runs;
// comp.startMu is held.
func (c *cluster) startIfExited(ctx context.Context, comp *component) error {
	if p := comp.proc(); p != nil && !p.Exited() {
		return nil
	}
	if comp == c.apiserver {
		return c.startAPIServer(ctx)
	}
	return c.start(comp)
}

// restartExited restarts the component if it exited on its own: it is
// not held down and its process has exited. It reports whether it did.
func (c *cluster) restartExited(ctx context.Context, comp *component) (bool, error) {
	comp.startMu.Lock()
	defer comp.startMu.Unlock()
	comp.mu.Lock()
	p, down := comp.p, comp.down
	if down || p == nil || !p.Exited() {
		comp.mu.Unlock()
		return false, nil
	}
	comp.exits++
	comp.mu.Unlock()
	return true, c.startIfExited(ctx, comp)
}

// supervise restarts, as systemd would, the components that exited on
// their own (not held down by the killer): a scheduler or controller
// manager that lost its lease exits by design.
func (c *cluster) supervise(ctx context.Context, logf func(string, ...any)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		for _, comp := range c.components {
			restarted, err := c.restartExited(ctx, comp)
			if restarted {
				logf("%s exited on its own; restarted it", comp.name)
			}
			if err != nil {
				logf("restart %s: %v", comp.name, err)
			}
		}
	}
}

// stop ends every component: nodes and drivers first, the API server last.
func (c *cluster) stop() {
	for i := len(c.components) - 1; i >= 0; i-- {
		if p := c.components[i].proc(); p != nil {
			_, _ = p.Terminate(10 * time.Second)
		}
	}
}

// kubeconfig writes a kubeconfig for a new token of role and name.
func (c *cluster) kubeconfig(ctx context.Context, data, role, name string) (string, error) {
	tok, err := c.allotCmd(ctx, "token", "create", "--data-dir", data, "--role", role, "--name", name)
	if err != nil {
		return "", err
	}
	kc, err := os.ReadFile(filepath.Join(data, "kubeconfig"))
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(?m)^(\s*token: ).*$`)
	if !re.Match(kc) {
		return "", errors.New("no token line in the admin kubeconfig")
	}
	path := filepath.Join(c.dir, role+"-"+name+".kubeconfig")
	return path, os.WriteFile(path, re.ReplaceAll(kc, []byte("${1}"+strings.TrimSpace(tok))), 0o600)
}

// simTokens writes a tokens file with a node token per simulated node.
func (c *cluster) simTokens(ctx context.Context, data string, n int) (string, error) {
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("sim-%d", i)
		tok, err := c.allotCmd(ctx, "token", "create", "--data-dir", data, "--role", "node", "--name", name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s,%s,node\n", strings.TrimSpace(tok), name)
	}
	path := filepath.Join(c.dir, "sim-tokens.csv")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// allotCmd runs a short allot command and returns its stdout.
func (c *cluster) allotCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.env
	cmd.SysProcAttr = testproc.SysProcAttr()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("allot %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("allot %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// waitReady waits until every node is Ready, every DRA node has published
// its gpu.example.com slice, and every upstream node's driver its
// resource.k8s.io/v1 slice.
func (c *cluster) waitReady(ctx context.Context, cfg clusterConfig) error {
	want := cfg.Nodes + cfg.UpstreamNodes + cfg.SimNodes
	return poll(ctx, 2*time.Minute, func() (bool, error) {
		nodes, err := c.admin.Nodes().List(ctx, listAll())
		if err != nil {
			return false, nil //nolint:nilerr // the server may still be starting
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" {
					ready++
				}
			}
		}
		slices, err := c.admin.NodeResourceSlices().List(ctx, listAll())
		if err != nil {
			return false, nil //nolint:nilerr
		}
		v1, err := c.admin.ResourceSlices().List(ctx, listAll())
		if err != nil {
			return false, nil //nolint:nilerr
		}
		upstream := 0
		for _, s := range v1.Items {
			if s.Spec.Driver == upstreamDriver {
				upstream++
			}
		}
		return ready >= want && len(slices.Items) >= cfg.Nodes && upstream >= cfg.UpstreamNodes, nil
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// poll calls cond every 100ms until it is true, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v", timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
