package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	s, st := benchServer(b)
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
			_, err := s.create(actx, k, &requestInfo{namespace: "default", resource: "pods"}, p)
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

// BenchmarkUpdateInProcess measures the API server's update paths (merge
// PATCH and PUT, each on a pod of its own so nothing conflicts: the read
// from the watch cache, decode, patch, validation, admission, encode and
// etcd transaction) through the handler without a network, against raw
// etcd updates at the same concurrency on the same embedded member (fsync
// on), alternating so both see the same conditions.
func BenchmarkUpdateInProcess(b *testing.B) {
	ctx := context.Background()
	s, st := benchServer(b)
	h := s.Handler()
	serve := func(method, path, ct, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	const workers = 16
	k := s.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	actx := context.WithValue(ctx, userKey{}, auth.User{Name: "admin", Role: auth.RoleAdmin})
	rawRev := make([]int64, workers)
	for w := range workers {
		p := makePod(fmt.Sprintf("u-%d", w)).obj()
		p.Namespace = "default"
		if _, err := s.create(actx, k, &requestInfo{namespace: "default", resource: "pods"}, p); err != nil {
			b.Fatal(err)
		}
		var err error
		if rawRev[w], err = st.Create(ctx, fmt.Sprintf("/registry/core/pods/default/raw-u-%d", w), []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"raw","namespace":"default"}}`)); err != nil {
			b.Fatal(err)
		}
	}
	// Each worker owns one pod (and one raw key), so no two operations
	// conflict. Besides the rates, the process's CPU time per operation
	// (etcd included: it runs in the process), which other load on the
	// machine disturbs less than the wall clock.
	var rawT, patchT, putT, rawCPU, patchCPU, putCPU time.Duration
	n := b.N * 500
	b.ResetTimer()
	for round := 0; round < 2; round++ {
		c0 := processCPU()
		rawT += parallelOwned(workers, n, func(w int, i int64) error {
			rev, err := st.Update(ctx, fmt.Sprintf("/registry/core/pods/default/raw-u-%d", w),
				[]byte(fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"raw","namespace":"default","labels":{"i":"%d"}}}`, i)), rawRev[w])
			rawRev[w] = rev
			return err
		})
		c1 := processCPU()
		patchT += parallelOwned(workers, n, func(w int, i int64) error {
			code, body := serve("PATCH", fmt.Sprintf("/api/v1/namespaces/default/pods/u-%d", w), "application/merge-patch+json",
				fmt.Sprintf(`{"metadata":{"labels":{"i":"%d"}}}`, i))
			if code != 200 {
				return fmt.Errorf("patch: %d %s", code, body)
			}
			return nil
		})
		c2 := processCPU()
		putT += parallelOwned(workers, n, func(w int, i int64) error {
			p := makePod(fmt.Sprintf("u-%d", w)).label("i", fmt.Sprint(i)).obj()
			p.Namespace = "default"
			code, body := serve("PUT", fmt.Sprintf("/api/v1/namespaces/default/pods/u-%d", w), "application/json", string(mustJSONb(p)))
			if code != 200 {
				return fmt.Errorf("put: %d %s", code, body)
			}
			return nil
		})
		c3 := processCPU()
		rawCPU, patchCPU, putCPU = rawCPU+c1-c0, patchCPU+c2-c1, putCPU+c3-c2
	}
	b.StopTimer()
	ops := float64(2 * n)
	raw, patch, put := ops/rawT.Seconds(), ops/patchT.Seconds(), ops/putT.Seconds()
	b.ReportMetric(raw, "etcd-txn/s")
	b.ReportMetric(patch, "patches/s")
	b.ReportMetric(put, "puts/s")
	b.ReportMetric(patch/raw, "patch/etcd")
	b.ReportMetric(put/raw, "put/etcd")
	b.ReportMetric(float64(rawCPU.Microseconds())/ops, "cpu-µs/txn")
	b.ReportMetric(float64(patchCPU.Microseconds())/ops, "cpu-µs/patch")
	b.ReportMetric(float64(putCPU.Microseconds())/ops, "cpu-µs/put")
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// parallelOwned runs n operations on workers goroutines; each operation
// gets its worker's index, so a worker may own an object.
func parallelOwned(workers, n int, op func(w int, i int64) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := op(w, i); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

func mustJSONb(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// benchServer starts an embedded etcd member (fsync on) and an API server
// over it with namespace default, stopped when b ends; it returns the
// server and a store over the same member, for the raw etcd reference
// measurements.
func benchServer(b *testing.B) (*Server, *storage.Store) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{DataDir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	c, err := storage.NewClient(ctx, e.Endpoints(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	st := storage.New(c)
	s := New(Config{Store: st, Logger: quiet})
	sctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	if err := s.Start(sctx); err != nil {
		b.Fatal(err)
	}
	if err := s.EnsureNamespaces(ctx, "default"); err != nil {
		b.Fatal(err)
	}
	return s, st
}
