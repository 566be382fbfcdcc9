// Package storagetest starts etcd for tests of packages built on
// internal/storage: an embedded single member (StartEtcd) or a real
// multi-member cluster of etcd child processes (StartExternalCluster).
package storagetest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"allot.dev/allot/internal/storage"
)

// QuietLogger discards everything.
func QuietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// StartEtcd starts an embedded etcd in t.TempDir() (fsync disabled) and
// stops it in t.Cleanup.
func StartEtcd(t testing.TB) *storage.Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{
		DataDir:       t.TempDir(),
		Logger:        testLogger(t),
		UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// NewClient connects to endpoints and closes the client in t.Cleanup.
func NewClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := storage.NewClient(ctx, endpoints, nil)
	if err != nil {
		t.Fatalf("connect to etcd: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NewStore starts an embedded etcd and returns a Store on it.
func NewStore(t testing.TB, opts ...storage.Option) *storage.Store {
	t.Helper()
	e := StartEtcd(t)
	return storage.New(NewClient(t, e.Endpoints()), opts...)
}

var prefixSeq atomic.Int64

// Prefix returns a key prefix unique to this test run, ending in "/".
func Prefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/test/%s-%d/", name, prefixSeq.Add(1))
}

// testLogger logs etcd errors through t so they show up with the test.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
