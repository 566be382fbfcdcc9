package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/storage"
)

// BenchmarkCreateInProcess measures the API server's create path (defaults,
// validation, admission, encode, etcd transaction) without HTTP, against
// raw etcd creates at the same concurrency on the same embedded member
// (fsync on), alternating so both see the same conditions. bench/'s
// BenchmarkCreate measures the same through HTTPS.
func BenchmarkCreateInProcess(b *testing.B) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{DataDir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	c, err := storage.NewClient(ctx, e.Endpoints(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	st := storage.New(c)
	s := New(Config{Store: st, Logger: quiet})
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.Start(sctx); err != nil {
		b.Fatal(err)
	}
	if err := s.EnsureNamespaces(ctx, "default"); err != nil {
		b.Fatal(err)
	}
	k := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	actx := context.WithValue(ctx, userKey{}, auth.User{Name: "admin", Role: auth.RoleAdmin})
	n := b.N * 1000
	var rawT, apiT time.Duration
	b.ResetTimer()
	for round := 0; round < 2; round++ {
		rawT += parallel16(n, func(i int64) error {
			_, err := st.Create(ctx, fmt.Sprintf("/registry/core/pods/default/raw-%d-%d", round, i),
				[]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"raw","namespace":"default"}}`))
			return err
		})
		apiT += parallel16(n, func(i int64) error {
			p := makePod(fmt.Sprintf("p-%d-%d", round, i)).obj()
			p.Namespace = "default"
			_, err := s.create(actx, k, &requestInfo{namespace: "default", resource: "pods"}, p, false)
			return err
		})
	}
	b.StopTimer()
	raw, api := float64(2*n)/rawT.Seconds(), float64(2*n)/apiT.Seconds()
	b.ReportMetric(raw, "etcd-txn/s")
	b.ReportMetric(api, "creates/s")
	b.ReportMetric(api/raw, "api/etcd")
}

func parallel16(n int, op func(i int64) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := op(i); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
