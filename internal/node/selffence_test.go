package node_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/pkg/client"
)

// cutProxy forwards TCP connections to the API server until cut: the
// test's way to take an agent off the network without touching the
// shared cluster.
type cutProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *cutProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut closes the listener and every forwarded connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// restore listens again on the same address.
func (p *cutProxy) restore() {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was just closed; it is ours to take again
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// proxiedClient is an admin client that reaches the API server through p.
func proxiedClient(t *testing.T) (*client.Client, *cutProxy) {
	t.Helper()
	rc, err := client.LoadRESTConfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, u.Host)
	u.Host = p.addr
	rc.Host = u.String()
	c, err := client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

// runningContainers returns the names of the pods whose containers run.
func runningContainers(t *testing.T, rt runtime.Runtime) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, cs := range list {
		if cs.State == runtime.StateRunning {
			out[cs.PodName] = true
		}
	}
	return out
}

// allocate allocates and reserves the claim for pod as the scheduler
// would, available on the nodes sel selects (nil: everywhere).
func allocate(t *testing.T, c *client.Client, ns, claim string, pod *corev1.Pod, sel *corev1.NodeSelector) {
	t.Helper()
	cl, err := c.ResourceClaims(ns).Get(callContext(t), claim)
	if err != nil {
		t.Fatal(err)
	}
	cl.Status.DriverName = draDriver
	cl.Status.Allocation = &resourcev1alpha2.AllocationResult{AvailableOnNodes: sel,
		ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: draDriver, Data: claim}}}
	cl.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := c.ResourceClaims(ns).UpdateStatus(callContext(t), cl); err != nil {
		t.Fatalf("allocate and reserve %s: %v", claim, err)
	}
}

// TestSelfFence: an agent cut from the API server for its fence time
// stops the pods holding devices other nodes can reach and the pods that
// opt in, unprepares their claims, and stops nothing else; it records its
// fence time on its Node; once back, it reports the fenced pods Failed.
func TestSelfFence(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	ac, proxy := proxiedClient(t)
	root := t.TempDir()
	cfg := agentConfig(t, ac, name, root)
	cfg.SelfFenceAfter = 800 * time.Millisecond
	registry := dratest.ShortTempDir(t)
	cfg.PluginsRegistryDir = registry
	cfg.DRAPrepareBackoffInitial, cfg.DRAPrepareBackoffMax = 100*time.Millisecond, 400*time.Millisecond
	rec := &recordingRuntime{Runtime: cfg.Runtime}
	cfg.Runtime = rec
	rt := cfg.Runtime
	startAgent(t, cfg)
	n := waitNodeReady(t, c, name)
	if got := n.Annotations[fence.AnnotationSelfFenceAfter]; got != "800ms" {
		t.Fatalf("Node annotation %s = %q, want 800ms", fence.AnnotationSelfFenceAfter, got)
	}
	plugin := dratest.Start(t, dratest.Options{Name: draDriver, RegistryDir: registry,
		Model: []byte(`{"partitionable":{"resourceInstances":[{"name":"gpu-0"}]}}`)})
	if st := plugin.Status(t); !st.PluginRegistered {
		t.Fatalf("plugin refused: %s", st.Error)
	}

	createClaim(t, c, ns, "shared")
	createClaim(t, c, ns, "local")
	multi := claimPod(ns, "multi", name, "shared").create(t, c)
	local := claimPod(ns, "local", name, "local").create(t, c)
	allocate(t, c, ns, "shared", multi, nil)
	allocate(t, c, ns, "local", local, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}}})
	optIn := makePod(ns, "opt-in", name)
	optIn.p.Annotations[fence.AnnotationPodFence] = "true"
	optIn.create(t, c)
	makePod(ns, "plain", name).create(t, c)
	for _, p := range []string{"multi", "local", "opt-in", "plain"} {
		waitPod(t, c, ns, p, p+" Running", running)
	}
	hb := filepath.Join(root, node.HeartbeatFile)
	if _, err := os.Stat(hb); err != nil {
		t.Fatalf("local heartbeat: %v", err)
	}
	// The fenced pods' containers carry their fence to the runtime (whose
	// shims enforce it while the agent is down); the others none.
	rec.mu.Lock()
	for _, sp := range rec.specs {
		fenced := sp.PodName == "multi" || sp.PodName == "opt-in"
		switch {
		case fenced && (sp.Fence == nil || sp.Fence.HeartbeatFile != hb || sp.Fence.After != cfg.SelfFenceAfter):
			t.Errorf("container of %s: fence %+v, want %s after %s", sp.PodName, sp.Fence, hb, cfg.SelfFenceAfter)
		case !fenced && sp.Fence != nil:
			t.Errorf("container of %s carries a fence %+v", sp.PodName, sp.Fence)
		}
	}
	rec.mu.Unlock()

	proxy.cut()
	eventually(t, 30*time.Second, "the fenced pods stopped", func() (bool, string) {
		run := runningContainers(t, rt)
		return !run["multi"] && !run["opt-in"], ""
	})
	eventually(t, 30*time.Second, "the multi-node claim unprepared", func() (bool, string) {
		for _, call := range plugin.Unprepared() {
			for _, cl := range call {
				if cl.Name == "shared" {
					return true, ""
				}
			}
		}
		return false, ""
	})
	for _, call := range plugin.Unprepared() {
		for _, cl := range call {
			if cl.Name == "local" {
				t.Fatal("the node-local claim was unprepared by the fence")
			}
		}
	}
	if run := runningContainers(t, rt); !run["local"] || !run["plain"] {
		t.Fatalf("the fence stopped pods it must not stop: running %v", run)
	}

	proxy.restore()
	for _, p := range []string{"multi", "opt-in"} {
		waitPod(t, c, ns, p, p+" Failed by the fence", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodFailed && p.Status.Reason == node.ReasonFenced
		})
	}
	for _, p := range []string{"local", "plain"} {
		if got, err := c.Pods(ns).Get(callContext(t), p); err != nil || got.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s after the fence: %v %+v", p, err, got.Status)
		}
	}
	// New pods run again once the heartbeat is back.
	makePod(ns, "after", name).create(t, c)
	waitPod(t, c, ns, "after", "a new pod Running", running)
	if err := c.Pods(ns).Delete(callContext(t), "after", metav1.DeleteOptions{}); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("delete: %v", err)
	}
}
