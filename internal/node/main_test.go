package node_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// cluster is the `allot up` child process the integration tests use.
var cluster *clienttest.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "allot-node-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := clienttest.Build(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster, err = clienttest.Start(ctx, bin, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", tail(cluster.Log(), 40))
	}
	return code
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func needCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs `allot up` (not run with -short)")
	}
}

func newClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewForKubeconfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("NewForKubeconfig: %v", err)
	}
	return c
}

// callContext bounds one API call of a test.
func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testName turns the test's name into a DNS label, unique per run so
// that -count=N works.
func testName(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return strings.Trim(name, "-") + "-" + utilrand.String(5)
}

func newNamespace(t *testing.T, c *client.Client) string {
	t.Helper()
	name := testName(t)
	if _, err := c.Namespaces().Create(callContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return name
}

// fastTimers makes an agent react in well under a second.
func fastTimers(cfg *node.Config) {
	cfg.HeartbeatInterval = 300 * time.Millisecond
	cfg.RelistInterval = 50 * time.Millisecond
	cfg.APITimeout = 20 * time.Second
	cfg.Pods = pods.Timing{
		Resync: time.Second, Retry: 200 * time.Millisecond, AdmitRetry: 200 * time.Millisecond,
		RestartBackoffInitial: 100 * time.Millisecond, RestartBackoffMax: 400 * time.Millisecond,
		TerminatedCleanup: time.Second, MaxGracePeriod: time.Second,
	}
}

// agentConfig is a loopback agent with the fake runtime persisting in
// ROOT/fake, so that a second agent on the same root adopts.
func agentConfig(t *testing.T, c *client.Client, name, root string) node.Config {
	t.Helper()
	cfg := node.Config{
		NodeName: name, Client: c, RootDir: root, NodeIP: "127.0.0.1", Hostname: name,
		LogListen: "127.0.0.1:0", Labels: map[string]string{"test": "node"},
		// The API server of `allot up` may not send a token to agents yet.
		LogAllowAnonymous: true,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	cfg.Runtime = newFakeRuntime(t, root)
	fastTimers(&cfg)
	return cfg
}

func newFakeRuntime(t *testing.T, root string) runtime.Runtime {
	t.Helper()
	rt, err := fake.New(fake.Options{StateDir: root + "/fake"})
	if err != nil {
		t.Fatalf("fake runtime: %v", err)
	}
	return rt
}

// testWriter sends agent logs to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startAgent runs an agent until the returned stop is called (or the test
// ends); stop waits for Run to return.
func startAgent(t *testing.T, cfg node.Config) (stop func()) {
	t.Helper()
	a, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("agent did not stop within 30s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != "" {
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPod waits until cond holds for the pod.
func waitPod(t *testing.T, c *client.Client, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, 60*time.Second, what, func() (bool, string) {
		p, err := c.Pods(ns).Get(callContext(t), name)
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return cond(p), fmt.Sprintf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return pod
}

func waitPodGone(t *testing.T, c *client.Client, ns, name string) {
	t.Helper()
	eventually(t, 60*time.Second, "pod "+name+" deleted", func() (bool, string) {
		p, err := c.Pods(ns).Get(callContext(t), name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("deletionTimestamp %v phase %s", p.DeletionTimestamp, p.Status.Phase)
	})
}

// podBuilder builds test pods.
type podBuilder struct{ p *corev1.Pod }

func makePod(ns, name, nodeName string) *podBuilder {
	return &podBuilder{p: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}}
}

func (b *podBuilder) exitAfter(d string, code int) *podBuilder {
	b.p.Annotations[fake.AnnotationExitAfter] = d
	b.p.Annotations[fake.AnnotationExitCode] = fmt.Sprint(code)
	return b
}

func (b *podBuilder) policy(p corev1.RestartPolicy) *podBuilder { b.p.Spec.RestartPolicy = p; return b }

func (b *podBuilder) initContainer(name string) *podBuilder {
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, corev1.Container{Name: name, Image: "busybox"})
	return b
}

func (b *podBuilder) create(t *testing.T, c *client.Client) *corev1.Pod {
	t.Helper()
	out, err := c.Pods(b.p.Namespace).Create(callContext(t), b.p)
	if err != nil {
		t.Fatalf("create pod %s: %v", b.p.Name, err)
	}
	return out
}

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }
