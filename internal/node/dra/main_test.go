package dra

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// cluster is the `allot up` child process (API server and etcd only: the
// tests play scheduler and claim controller with an admin client).
var cluster *clienttest.Cluster

// nodePool are the node identities `allot up` creates tokens for; each
// test takes its own, so tests never see each other's slices.
var (
	nodePool = func() []string {
		var out []string
		for i := range 60 {
			out = append(out, fmt.Sprintf("dra-node-%d", i))
		}
		return out
	}()
	nodeMu   sync.Mutex
	nodeNext int
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "allot-dra-test-")
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
	cluster, err = clienttest.Start(ctx, bin, dir, "--disable", "controller-manager,scheduler,node",
		"--node-name", strings.Join(nodePool, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	return m.Run()
}

func needCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs `allot up` (not run with -short)")
	}
}

func adminClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewForKubeconfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return c
}

// nodeClient connects as node name, the identity the agent has, so the
// tests also prove the node role allows what the manager writes.
func nodeClient(t *testing.T, name string) *client.Client {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.DataDir, "tokens.csv"))
	if err != nil {
		t.Fatalf("read tokens: %v", err)
	}
	token := ""
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(strings.TrimSpace(line), ","); len(f) == 3 && f[1] == name && f[2] == "node" {
			token = f[0]
		}
	}
	if token == "" {
		t.Fatalf("no token for node %s", name)
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

// takeNode returns a node identity no other test uses.
func takeNode(t *testing.T) string {
	t.Helper()
	nodeMu.Lock()
	defer nodeMu.Unlock()
	if nodeNext == len(nodePool) {
		t.Fatalf("all %d test node identities are taken (run with a smaller -count)", len(nodePool))
	}
	nodeNext++
	return nodePool[nodeNext-1]
}

// callCtx bounds one API call of a test.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 20ms until it holds, for up to 20s.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a deadline for a loaded machine, not a speed check
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
			t.Fatalf("timed out waiting for %s; last state: %s", what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
