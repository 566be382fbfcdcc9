package integration

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/schedtest"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

var (
	cluster *clienttest.Cluster
	binary  string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration tests need a cluster: skipped in -short mode")
		return 0
	}
	dir, err := os.MkdirTemp("", "allot-scheduler-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if binary, err = clienttest.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// No controllers (the node lifecycle controller would mark the test's
	// heartbeat-less nodes NotReady) and no in-process scheduler: each
	// test runs its own.
	cluster, err = clienttest.Start(ctx, binary, dir, "--disable", "controller-manager", "--disable", "scheduler")
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
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func newClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewForKubeconfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// schedulerClient connects as the scheduler identity that `allot up`
// created (role scheduler), so the tests also prove the scheduler needs
// no more than that role allows.
func schedulerClient(t *testing.T) *client.Client {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.DataDir, "tokens.csv"))
	if err != nil {
		t.Fatalf("read tokens: %v", err)
	}
	token := ""
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(strings.TrimSpace(line), ","); len(f) == 3 && f[1] == "scheduler" && f[2] == "scheduler" {
			token = f[0]
		}
	}
	if token == "" {
		t.Fatal("no scheduler token in the tokens file")
	}
	rc, err := client.LoadRESTConfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.BearerToken, rc.BearerTokenFile = token, ""
	c, err := client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// callCtx bounds one API call.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testName is the test's name as a DNS label.
func testName(t *testing.T) string {
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	return strings.Trim(n[:min(len(n), 40)], "-")
}

// env is one test's world: a namespace, nodes, and a scheduler whose
// schedulerName only this test's pods use.
type env struct {
	t    *testing.T
	c    *client.Client
	ns   string
	name string // schedulerName and node prefix
}

func newEnv(t *testing.T, mutate func(*scheduler.Config), nodes ...*corev1.Node) *env {
	t.Helper()
	e := &env{t: t, c: newClient(t), name: testName(t)}
	e.ns = e.name
	if _, err := e.c.Namespaces().Create(callCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	for _, n := range nodes {
		e.createNode(n)
	}
	cfg := scheduler.Config{
		Client: schedulerClient(t), SchedulerName: e.name,
		PodInitialBackoff: 50 * time.Millisecond, PodMaxBackoff: 200 * time.Millisecond,
		UnschedulableTimeout: time.Hour, // events, never polling, must move pods
		BindTimeout:          5 * time.Second, APITimeout: 5 * time.Second, CycleTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
	return e
}

// createNode creates a node (named after the test) with its status.
func (e *env) createNode(n *corev1.Node) *corev1.Node {
	e.t.Helper()
	n = n.DeepCopy()
	n.Name = e.name + "-" + n.Name
	n.UID = ""
	status := n.Status
	out, err := e.c.Nodes().Create(callCtx(e.t), n)
	if err != nil {
		e.t.Fatalf("create node %s: %v", n.Name, err)
	}
	out.Status = status
	if out, err = e.c.Nodes().UpdateStatus(callCtx(e.t), out); err != nil {
		e.t.Fatalf("set status of node %s: %v", n.Name, err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.c.Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("delete node %s: %v", n.Name, err)
		}
	})
	return out
}

// node is the full name of a test node.
func (e *env) node(short string) string { return e.name + "-" + short }

// createPod creates a pod for this test's scheduler.
func (e *env) createPod(b schedtest.PodBuilder) *corev1.Pod {
	e.t.Helper()
	p := b.Namespace(e.ns).Obj()
	if p.Spec.SchedulerName == "default-scheduler" {
		p.Spec.SchedulerName = e.name
	}
	p.UID = ""
	if p.Spec.NodeName != "" {
		p.Spec.NodeName = e.node(p.Spec.NodeName)
	}
	out, err := e.c.Pods(e.ns).Create(callCtx(e.t), p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return out
}

func (e *env) getPod(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.c.Pods(e.ns).Get(callCtx(e.t), name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

func (e *env) deletePod(name string) {
	e.t.Helper()
	zero := int64(0)
	if err := e.c.Pods(e.ns).Delete(callCtx(e.t), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		e.t.Fatalf("delete pod %s: %v", name, err)
	}
}

// eventually polls cond every 20ms for up to 20 seconds.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitBound waits for the pod to get a node and returns its short name.
func (e *env) waitBound(pod string) string {
	e.t.Helper()
	var node string
	e.eventually("pod "+pod+" to be bound", func() bool {
		node = e.getPod(pod).Spec.NodeName
		return node != ""
	})
	return strings.TrimPrefix(node, e.name+"-")
}

// waitUnschedulable waits for PodScheduled=False/Unschedulable and
// returns its message.
func (e *env) waitUnschedulable(pod string) string {
	e.t.Helper()
	var msg string
	e.eventually("pod "+pod+" to be marked unschedulable", func() bool {
		c := scheduler.PodScheduledCondition(e.getPod(pod))
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			return false
		}
		msg = c.Message
		return true
	})
	return msg
}

// events lists the events about a pod.
func (e *env) events(pod string) []corev1.Event {
	e.t.Helper()
	list, err := e.c.Events(e.ns).List(callCtx(e.t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		e.t.Fatalf("list events: %v", err)
	}
	return list.Items
}
