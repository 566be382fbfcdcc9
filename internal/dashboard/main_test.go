package dashboard_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/cluster"
	"allot.dev/allot/internal/controller/manager"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/pkg/client"
)

// up is the cluster every test of the package shares: `allot up` run
// in-process (API server with the dashboard, scheduler, controller
// manager; no local node agent), as the command runs it.
var up struct {
	// URL is the API server's; Dashboard the login URL `allot up` printed.
	URL, Dashboard string
	Kubeconfig     string
	DataDir        string
	LogFile        string
	// AdminToken is the kubeconfig's token.
	AdminToken string
	Admin      *client.Client
	// REST reaches the API server without credentials.
	REST *rest.Config
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("dashboard tests need a cluster: skipped in -short mode")
		return 0
	}
	dir, err := os.MkdirTemp("", "allot-dashboard-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := startCluster(ctx, dir)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, tail(up.LogFile, 40))
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-stopped; err != nil {
		fmt.Fprintln(os.Stderr, "allot up:", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", tail(up.LogFile, 40))
	}
	return code
}

// startCluster runs cluster.Up until ctx ends and waits for the lines it
// prints. The returned channel yields Up's result once it has stopped.
func startCluster(ctx context.Context, dir string) (<-chan error, error) {
	// Up records its kubeconfig in the user's config dir: keep it here.
	if err := os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")); err != nil {
		return nil, err
	}
	up.DataDir, up.LogFile = filepath.Join(dir, "data"), filepath.Join(dir, "allot.log")
	logf, err := os.Create(up.LogFile)
	if err != nil {
		return nil, fmt.Errorf("create cluster log: %w", err)
	}
	o := cluster.Options{
		DataDir: up.DataDir, Listen: "127.0.0.1:0", NodeNames: []string{"local"},
		Disable: []string{"node"},
		// The tests' nodes have no agent to heartbeat for them.
		Controllers: manager.Config{NodeMonitorGracePeriod: time.Hour},
		Scheduler:   scheduler.Config{PodInitialBackoff: 50 * time.Millisecond, PodMaxBackoff: 200 * time.Millisecond},
		Logger:      slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	pr, pw := io.Pipe()
	stopped := make(chan error, 1)
	go func() {
		err := cluster.Up(ctx, o, pw)
		pw.Close()
		logf.Close()
		stopped <- err
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, pr)
	}()
	timeout := time.After(time.Minute)
	for up.Dashboard == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				return nil, fmt.Errorf("allot up stopped: %v", <-stopped)
			}
			if v, ok := strings.CutPrefix(line, "allot API server listening on "); ok {
				up.URL = v
			}
			if v, ok := strings.CutPrefix(line, "kubeconfig: "); ok {
				up.Kubeconfig = v
			}
			if v, ok := strings.CutPrefix(line, "dashboard: "); ok {
				up.Dashboard = v
			}
		case <-timeout:
			return nil, fmt.Errorf("allot up printed no dashboard URL within a minute")
		}
	}
	go func() {
		for range lines {
		}
	}()
	rc, err := client.LoadRESTConfig(up.Kubeconfig)
	if err != nil {
		return nil, err
	}
	up.AdminToken = rc.BearerToken
	up.REST = rest.AnonymousClientConfig(rc)
	if up.Admin, err = client.NewForConfig(rc); err != nil {
		return nil, err
	}
	return stopped, nil
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// callCtx bounds one API call.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// get GETs path on the API server's origin with token ("" sends none),
// following no redirect.
func get(t *testing.T, path, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(callCtx(t), http.MethodGet, up.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

// do sends req to the API server's origin, trusting its CA.
func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	hc, err := rest.HTTPClientFor(up.REST)
	if err != nil {
		t.Fatal(err)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer of %s: %v", req.URL.Path, err)
	}
	return resp, body
}

// eventually polls cond until it holds or a minute passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// must fails the test when fn does.
func must(t *testing.T, what string, fn func() error) {
	t.Helper()
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// createNamespace creates ns and deletes it when the test ends.
func createNamespace(t *testing.T, ns string) {
	t.Helper()
	must(t, "create namespace "+ns, func() error {
		_, err := up.Admin.Namespaces().Create(callCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		return err
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := up.Admin.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
}

// createNode creates a node with its status (Ready unless the builder
// said otherwise) and deletes it when the test ends.
func createNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	n = n.DeepCopy()
	n.UID = ""
	status := n.Status
	for i := range status.Conditions {
		status.Conditions[i].LastHeartbeatTime = metav1.Now()
	}
	out, err := up.Admin.Nodes().Create(callCtx(t), n)
	if err != nil {
		t.Fatalf("create node %s: %v", n.Name, err)
	}
	out.Status = status
	if _, err := up.Admin.Nodes().UpdateStatus(callCtx(t), out); err != nil {
		t.Fatalf("set status of node %s: %v", n.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := up.Admin.Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", n.Name, err)
		}
	})
}
