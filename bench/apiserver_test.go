package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
)

// runParallel runs n operations on `clients` goroutines and returns the
// rate per second.
func runParallel(b *testing.B, clients, n int, op func(i int) error) float64 {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return float64(n) / elapsed.Seconds()
}

// BenchmarkCreate measures pod creates per second through the API server
// (HTTP/2 over TLS, decode, defaults, validation, admission, etcd
// transaction) and raw etcd create transactions of the same size at the
// same concurrency, in the same run, and reports the ratio. The two
// alternate in rounds so that a noisy neighbour weighs on both alike.
func BenchmarkCreate(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			e := newEnv(b)
			n := b.N * 1000
			if clients == 1 {
				n = b.N * 300
			}
			ctx := context.Background()
			value := smallPod("raw")
			var rawT, apiT float64 // seconds
			b.ResetTimer()
			for round := 0; round < 2; round++ {
				raw := runParallel(b, clients, n, func(i int) error {
					_, err := e.store.Create(ctx, fmt.Sprintf("/registry/core/pods/default/raw-%d-%d", round, i), value)
					return err
				})
				api := runParallel(b, clients, n, func(i int) error {
					return e.post("/api/v1/namespaces/default/pods", smallPod(fmt.Sprintf("p-%d-%d", round, i)))
				})
				rawT += float64(n) / raw
				apiT += float64(n) / api
			}
			b.StopTimer()
			raw, api := float64(2*n)/rawT, float64(2*n)/apiT
			b.ReportMetric(raw, "etcd-txn/s")
			b.ReportMetric(api, "api-creates/s")
			b.ReportMetric(api/raw, "api/etcd")
		})
	}
}

// BenchmarkWatchLatency measures the time from a create's answer to its
// event reaching each of 100 watchers (one HTTP watch each).
func BenchmarkWatchLatency(b *testing.B) {
	e := newEnv(b)
	const watchers = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	created := map[string]time.Time{}
	var lat []time.Duration
	var got sync.WaitGroup
	ready := make(chan struct{}, watchers)
	for w := 0; w < watchers; w++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/namespaces/default/pods?watch=true&resourceVersion=0", nil)
		res, err := e.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			defer res.Body.Close()
			ready <- struct{}{}
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				i := strings.Index(line, `"name":"w-`)
				if i < 0 {
					continue
				}
				name := line[i+8 : i+8+strings.IndexByte(line[i+8:], '"')]
				now := time.Now()
				mu.Lock()
				t0, ok := created[name]
				if ok {
					lat = append(lat, now.Sub(t0))
				}
				mu.Unlock()
				if ok {
					got.Done()
				}
			}
		}()
	}
	for w := 0; w < watchers; w++ {
		<-ready
	}
	n := b.N * 20
	b.ResetTimer()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("w-%d", i)
		got.Add(watchers)
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		if err := e.post("/api/v1/namespaces/default/pods", smallPod(name)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // a steady stream, not a burst
	}
	done := make(chan struct{})
	go func() { got.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatal("watchers did not receive every event")
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}

// BenchmarkListFromCache measures a LIST of many small objects served from
// the watch cache, and the heap the cache holds per object.
func BenchmarkListFromCache(b *testing.B) {
	e := newEnv(b)
	count := objectCount(100000)
	ctx := context.Background()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// Load through etcd directly in batches (the API path is measured by
	// BenchmarkCreate); the watch cache picks every object up.
	const batch = 100
	for i := 0; i < count; i += batch {
		var ops []storage.Op
		for j := i; j < i+batch && j < count; j++ {
			name := fmt.Sprintf("l-%06d", j)
			ops = append(ops, storage.Create("/registry/core/pods/default/"+name, storedPod(name)))
		}
		if _, err := e.store.Txn(ctx, ops); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := e.client.Get(e.srv.URL + "/api/v1/namespaces/default/pods?resourceVersion=0&labelSelector=none%3Dnone")
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		rev, _ := e.store.CurrentRevision(ctx)
		if res.StatusCode == 200 && rev > 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("cache did not fill")
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	var bytesRead int64
	for i := 0; i < b.N; i++ {
		res, err := e.client.Get(e.srv.URL + "/api/v1/namespaces/default/pods")
		if err != nil {
			b.Fatal(err)
		}
		nb, err := drain(res)
		if err != nil {
			b.Fatal(err)
		}
		bytesRead = nb
	}
	b.StopTimer()
	b.ReportMetric(float64(count), "objects")
	b.ReportMetric(float64(bytesRead)/float64(count), "bytes/object-served")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(count), "heap-bytes/object")
}

// storedPod is a pod as the API server stores it (no resourceVersion).
func storedPod(name string) []byte {
	return []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"default","uid":"00000000-0000-0000-0000-` +
		fmt.Sprintf("%012d", len(name)) + `","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"app":"bench"}},"spec":{"containers":[{"name":"c","image":"busybox"}],"restartPolicy":"Always"},"status":{"phase":"Pending"}}`)
}

func drain(res *http.Response) (int64, error) {
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return 0, fmt.Errorf("list: %d", res.StatusCode)
	}
	var n int64
	buf := make([]byte, 256<<10)
	for {
		k, err := res.Body.Read(buf)
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}
