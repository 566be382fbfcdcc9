// Package testcluster starts `allot up` for the controllers' integration
// tests. It is a thin layer over pkg/client/clienttest with the shape the
// controller tests use: a binary built once per package, and a cluster per
// test that stops at cleanup.
package testcluster

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"allot.dev/allot/pkg/client/clienttest"
)

// Build compiles cmd/allot into dir and returns the binary's path.
func Build(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return clienttest.Build(ctx, dir)
}

// Start runs `allot up` (no compaction, no scheduler or local node) in a
// temporary directory, stops it when the test ends, and returns a config
// for its admin user.
func Start(t testing.TB, bin string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := clienttest.Start(ctx, bin, t.TempDir(), "--etcd-compaction-interval", "0")
	if err != nil {
		t.Fatalf("start allot up: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("allot up log:\n%s", cl.Log())
		}
		cl.Stop()
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", cl.Kubeconfig, err)
	}
	return cfg
}
