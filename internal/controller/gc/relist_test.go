package gc

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/pkg/client/clienttest"
)

// watchGate holds back watch requests while closed, so that a test can
// decide when informers resume watching.
type watchGate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newWatchGate() *watchGate {
	g := &watchGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *watchGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *watchGate) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The API server restarts while a pod is deleted and a new pod of the same
// name is created, and etcd is compacted past both before the collector
// reconnects. Its watch cannot resume (the revision it asks for is gone
// from etcd's history: 410 Gone), so its informer relists and finds the
// name taken by the new pod: one update from the old pod to the new, no
// delete. (Without the compaction the new server reads the missed changes
// from etcd's history and the watch resumes.) The collector must still forget the old
// pod and collect its claim. Before informer handlers split such updates
// (client.SplitReplacements), the old pod stayed in the owner graph and
// the claim was never collected, until the controller manager restarted.
func TestRelistAfterRestartCollectsDependentsOfReplacedOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	// The API server alone: no controller manager, whose collector would
	// do the job of the one under test.
	args := []string{"--etcd-compaction-interval", "0", "--listen", listen, "--disable", "controller-manager,scheduler,node"}
	start := func() *clienttest.Cluster {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl, err := clienttest.Start(ctx, allotBin, dir, args...)
		if err != nil {
			t.Fatalf("start allot up: %v", err)
		}
		return cl
	}
	cl := start()
	t.Cleanup(func() { cl.Stop() })
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(cl.DataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	gate := newWatchGate()
	gcCfg := *cfg
	gcCfg.WrapTransport = gate.wrap
	c, err := New(&gcCfg, Options{ResyncInterval: time.Second, RediscoveryInterval: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: context.Background(), dyn: dyn, ns: "default"}

	old := e.create(pod("p"))
	e.create(claim("c").ownedBy(old))
	e.eventually("the collector sees the pod and its claim", func() bool { return c.graph.present(old.GetUID()) && c.graph.hasDependents(old.GetUID()) })

	gate.close()
	cl.Stop()
	cl = start()
	e.delete(podGVR, "p", "") // not bound to a node: gone at once
	replacement := e.create(pod("p"))
	compactEtcd(t, filepath.Join(cl.DataDir, "etcd", storage.EndpointFile))
	gate.release()

	e.eventuallyGone(claimGVR, "c")
	e.eventually("the collector forgets the old pod", func() bool { return !c.graph.present(old.GetUID()) })
	if !c.graph.present(replacement.GetUID()) {
		e.eventually("the collector sees the new pod", func() bool { return c.graph.present(replacement.GetUID()) })
	}
}

// compactEtcd compacts the etcd whose client endpoint is in endpointFile
// to its current revision.
func compactEtcd(t *testing.T, endpointFile string) {
	t.Helper()
	b, err := os.ReadFile(endpointFile)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(strings.TrimSpace(string(b)), ","), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := ec.Get(ctx, "compact-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
}
