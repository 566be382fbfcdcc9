package translator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// The cluster every integration test uses: `allot up` with the
// GpuClaimParameters CRD installed, an admin client, and a client with a
// driver token for gpu.example.com, which every translator of the tests
// runs with.
var (
	cluster     *clienttest.Cluster
	allotBinary string
	admin       *client.Client
	driver      *client.Client
	driverToken string
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gpu-translator-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if allotBinary, err = clienttest.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The garbage collector rediscovers resources quickly, so that it
	// follows owner references to GpuClaimParameters soon after the CRD
	// appears.
	if cluster, err = clienttest.Start(ctx, allotBinary, dir, "--gc-rediscovery", "500ms"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", tail(cluster.Log(), 60))
	}
	return code
}

func setUp(ctx context.Context) error {
	var err error
	if admin, err = client.NewForKubeconfig(cluster.Kubeconfig); err != nil {
		return err
	}
	// The driver's part of deploy/, as an administrator installs it.
	if out, err := allot(ctx, "apply", "-f", "../deploy"); err != nil {
		return fmt.Errorf("allot apply -f deploy: %w\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, allotBinary, "token", "create", "--data-dir", cluster.DataDir,
		"--role", "driver", "--name", DriverName).Output()
	if err != nil {
		return fmt.Errorf("create a driver token: %w", err)
	}
	driverToken = strings.TrimSpace(string(out))
	rc := admin.RESTConfig()
	rc.BearerToken = driverToken
	if driver, err = client.NewForConfig(rc); err != nil {
		return err
	}
	// The API server reloads its tokens file, and serves the CRD, soon.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := driver.Dynamic().Resource(GroupVersionResource).List(ctx, metav1.ListOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("list %s with the driver token: %w", Resource, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// allot runs the allot CLI against the test cluster as its admin.
func allot(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, allotBinary, args...)
	cmd.Env = cluster.Env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// testContext is bounded so that a hung server fails the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq atomic.Int64

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), nameSeq.Add(1))
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	name = strings.Trim(name, "-")
	if _, err := admin.Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// startTranslator runs the translator for one namespace with the driver
// token and short timers until the test ends; Run must then return nil.
func startTranslator(t *testing.T, ns string) {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: driver, Namespace: ns, Resync: time.Minute,
			MinRetryDelay: 10 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond, APITimeout: 10 * time.Second,
			CRDPollInterval: 50 * time.Millisecond, EventFlushTimeout: 2 * time.Second, Host: "test",
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil after stop", err)
		}
		if t.Failed() {
			t.Logf("translator log:\n%s", logs.String())
		}
	})
}

// vendorClient is the admin's dynamic client of GpuClaimParameters in ns.
func vendorClient(ns string) dynamic.ResourceInterface {
	return admin.Dynamic().Resource(GroupVersionResource).Namespace(ns)
}

// eventually polls cond until it holds or 30 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// findEvent returns the first event about object name in ns with reason
// whose message contains each of parts.
func findEvent(t *testing.T, ns, name, reason string, parts ...string) (*corev1.Event, bool) {
	t.Helper()
	list, err := admin.Events(ns).List(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
next:
	for i := range list.Items {
		ev := &list.Items[i]
		if ev.InvolvedObject.Name != name || ev.InvolvedObject.Kind != Kind || ev.Reason != reason {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(ev.Message, p) {
				continue next
			}
		}
		return ev, true
	}
	return nil, false
}

// isNotFound reports a NotFound error; other errors fail the test.
func isNotFound(t *testing.T, err error) bool {
	t.Helper()
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("unexpected error: %v", err)
	}
	return err != nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
