package resourceclaim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// cluster is an API server without scheduler, node agent or controller
// manager: the only controller is the one a test starts in-process.
var cluster *clienttest.Cluster

// allotBin is the binary the cluster runs (for `allot token create`).
var allotBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "allot-resourceclaim-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
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
	allotBin = bin
	cluster, err = clienttest.Start(ctx, bin, dir, "--disable", "scheduler,node,controller-manager")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	code := m.Run()
	if code != 0 {
		log := strings.Split(strings.TrimRight(cluster.Log(), "\n"), "\n")
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", strings.Join(log[max(0, len(log)-40):], "\n"))
	}
	return code
}

// pollTimeout is generous: the tests assert outcomes, never timing.
const pollTimeout = 30 * time.Second

type env struct {
	t   testing.TB
	ctx context.Context
	c   *client.Client
	ns  string
}

var nsSeq atomic.Int64

// newEnv connects to the cluster and creates a namespace for the test.
func newEnv(t testing.TB) *env {
	t.Helper()
	c, err := client.NewForKubeconfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("NewForKubeconfig: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, c: c, ns: fmt.Sprintf("rc-test-%d", nsSeq.Add(1))}
	ns := newNamespace(e.ns)
	if _, err := c.Namespaces().Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return e
}

// startController runs a controller until the returned stop is called or
// the test ends; tune changes its options.
func (e *env) startController(tune ...func(*Options)) (*Controller, func()) {
	e.t.Helper()
	f := client.NewFactory(e.c, 0)
	opts := Options{
		ResyncInterval: 200 * time.Millisecond,
		MinRetryDelay:  20 * time.Millisecond,
		MaxRetryDelay:  200 * time.Millisecond,
		APITimeout:     10 * time.Second,
		Registry:       prometheus.NewRegistry(),
		Logger:         slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, t := range tune {
		t(&opts)
	}
	ctrl, err := New(e.c, f, opts)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	f.Start(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 2) }()
	// The tests change pods right after this: first let the controller
	// see the pods there are (their nodes, which the fencing rule needs;
	// a pod it never saw is judged as if its node could be anywhere).
	if err := f.WaitForCacheSync(ctx); err != nil {
		e.t.Fatalf("sync informers: %v", err)
	}
	e.eventually("the controller has seen the bound pods with claims", func() bool {
		pods, err := ctrl.pods.Lister().List(labels.Everything())
		if err != nil {
			return false
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" && len(p.Spec.ResourceClaims) > 0 && !ctrl.nodeKnown(p.UID) {
				return false
			}
		}
		return true
	})
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
		f.Shutdown()
	}
	e.t.Cleanup(stop)
	return ctrl, stop
}

// testWriter sends the controller's log to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// eventually polls cond until it holds, failing the test after pollTimeout.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consistently checks that cond holds for d.
func (e *env) consistently(what string, d time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			e.t.Fatalf("%s no longer holds", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
