package storage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"allot.dev/allot/internal/storage"
)

// sharedClient talks to one embedded etcd shared by the tests of this
// package; tests use distinct key prefixes. Tests that compact use their
// own etcd (storagetest.NewStore).
var (
	sharedClient   *clientv3.Client
	sharedEmbedded *storage.Embedded
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "allot-storage-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{DataDir: dir, Logger: logger, UnsafeNoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded etcd:", err)
		return 1
	}
	defer e.Close()
	sharedEmbedded = e
	sharedClient, err = storage.NewClient(ctx, e.Endpoints(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect to embedded etcd:", err)
		return 1
	}
	defer sharedClient.Close()
	return m.Run()
}

func newStore(opts ...storage.Option) *storage.Store {
	return storage.New(sharedClient, opts...)
}

// testCtx returns a context that ends with the test (or after 2 minutes).
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls fn until it returns nil, failing the test after a
// generous deadline.
func eventually(t testing.TB, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 60s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
