package storage_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

func TestEmbeddedRestartKeepsData(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cfg := storage.EmbeddedConfig{DataDir: dir, Logger: storagetest.QuietLogger()}

	e1, err := storage.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkEndpointFile(t, dir, e1.Endpoints())
	c1, err := storage.NewClient(ctx, e1.Endpoints(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rev := must[int64](t)(storage.New(c1).Create(ctx, "/restart/key", []byte("kept")))
	c1.Close()
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2, err := storage.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkEndpointFile(t, dir, e2.Endpoints())
	c2, err := storage.NewClient(ctx, e2.Endpoints(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kv := must[storage.KV](t)(storage.New(c2).Get(ctx, "/restart/key"))
	if string(kv.Value) != "kept" || kv.ModRevision != rev {
		t.Fatalf("after restart got %+v, want kept@%d", kv, rev)
	}
	// Still writable after the restart.
	rev2 := must[int64](t)(storage.New(c2).Update(ctx, "/restart/key", []byte("v2"), rev))
	c2.Close()
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}

	t.Logf("endpoints: first %v, after restart %v", e1.Endpoints(), e2.Endpoints())
	// The recorded client port is taken: the restart picks another one.
	u, err := url.Parse(e2.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatalf("occupy %s: %v", u.Host, err)
	}
	defer l.Close()
	e3, err := storage.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e3.Close()
	if e3.Endpoints()[0] == e2.Endpoints()[0] {
		t.Fatalf("restart reused occupied endpoint %s", e2.Endpoints()[0])
	}
	checkEndpointFile(t, dir, e3.Endpoints())
	c3 := storagetest.NewClient(t, e3.Endpoints())
	kv = must[storage.KV](t)(storage.New(c3).Get(ctx, "/restart/key"))
	if string(kv.Value) != "v2" || kv.ModRevision != rev2 {
		t.Fatalf("after second restart got %+v, want v2@%d", kv, rev2)
	}
}

func checkEndpointFile(t *testing.T, dir string, endpoints []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, storage.EndpointFile))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(b))
	if got != strings.Join(endpoints, ",") || !strings.HasPrefix(got, "http://127.0.0.1:") {
		t.Fatalf("endpoint file %q, endpoints %v", got, endpoints)
	}
	if strings.HasSuffix(got, ":2379") {
		t.Fatalf("embedded etcd uses the fixed port 2379")
	}
}

func TestEmbeddedRejectsMissingDataDir(t *testing.T) {
	if _, err := storage.StartEmbedded(context.Background(), storage.EmbeddedConfig{}); err == nil {
		t.Fatal("StartEmbedded without DataDir succeeded")
	}
}

// TestExternalCluster runs against a real 3-member etcd cluster of child
// processes and checks that writes survive the loss of one member.
func TestExternalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	endpoints, stop := storagetest.StartExternalCluster(t, 3)
	ctx := testCtx(t)
	s := storage.New(storagetest.NewClient(t, endpoints))
	p := storagetest.Prefix(t)
	must[int64](t)(s.Create(ctx, p+"before", []byte("1")))

	stop(0)
	// A write may fail while the cluster elects a new leader; poll until
	// one succeeds, then every further write must succeed.
	n := 0
	eventually(t, "write after losing a member", func() error {
		n++
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := s.Create(wctx, fmt.Sprintf("%safter-%d", p, n), []byte("2"))
		return err
	})
	for i := range 10 {
		if _, err := s.Create(ctx, fmt.Sprintf("%ssteady-%d", p, i), []byte("3")); err != nil {
			t.Fatalf("write %d with 2 of 3 members: %v", i, err)
		}
	}
	// Read through a surviving member only.
	s2 := storage.New(storagetest.NewClient(t, endpoints[1:2]))
	res := must[storage.ListResult](t)(s2.List(ctx, p+"steady-", storage.ListOptions{}))
	if len(res.Items) != 10 {
		t.Fatalf("surviving member lists %d steady keys, want 10", len(res.Items))
	}
	if _, err := s2.Get(ctx, p+"before"); err != nil {
		t.Fatalf("write from before the member loss: %v", err)
	}
}

// TestEmbeddedSmallCatchUpWindowKeepsData: the single member keeps only a
// small raft log in memory (embeddedCatchUpEntries, not etcd's 5,000);
// writes well past several compactions of that log are all read back,
// before and after a restart, which replays the WAL and snapshot.
func TestEmbeddedSmallCatchUpWindowKeepsData(t *testing.T) {
	ctx := testCtx(t)
	cfg := storage.EmbeddedConfig{DataDir: t.TempDir(), Logger: storagetest.QuietLogger(), UnsafeNoFsync: true}
	e1, err := storage.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	running, configured := e1.CatchUpEntriesForTest()
	if running != configured || running >= 5000 {
		t.Fatalf("catch-up entries %d, want the configured %d (below etcd's default 5,000)", running, configured)
	}
	const n = 600
	c1 := storagetest.NewClient(t, e1.Endpoints())
	st := storage.New(c1)
	for i := range n {
		if _, err := st.Create(ctx, fmt.Sprintf("/catchup/%04d", i), []byte(strings.Repeat("v", i))); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	check := func(st *storage.Store, when string) {
		for i := range n {
			kv, err := st.Get(ctx, fmt.Sprintf("/catchup/%04d", i))
			if err != nil || len(kv.Value) != i {
				t.Fatalf("%s: key %d: %d bytes, %v; want %d bytes", when, i, len(kv.Value), err, i)
			}
		}
	}
	check(st, "before the restart")
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := storage.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	check(storage.New(storagetest.NewClient(t, e2.Endpoints())), "after the restart")
}
