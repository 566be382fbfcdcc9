package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

// BenchmarkTxnCreate measures Create transactions against the embedded
// etcd with 1 and 16 concurrent callers sharing one client.
func BenchmarkTxnCreate(b *testing.B) {
	val := bytes.Repeat([]byte("x"), 300)
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx, s := testCtx(b), newStore()
			p := fmt.Sprintf("/bench/txn/%d-%d/", clients, time.Now().UnixNano())
			var seq atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Go(func() {
					for i := seq.Add(1); i <= int64(b.N); i = seq.Add(1) {
						if _, err := s.Txn(ctx, []storage.Op{storage.Create(fmt.Sprintf("%s%d", p, i), val)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
		})
	}
}

const benchObjects = 100_000

var bench100k struct {
	once   sync.Once
	cacher *storage.Cacher
	// heap retained per cached object without a decoder and with a
	// decoder that extracts labels
	rawBytesPerObj, labelBytesPerObj float64
	err                              error
}

// decodeLabels extracts only labels, as a selector-serving decoder would.
func decodeLabels(_ string, value []byte) (storage.Decoded, error) {
	var o struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(value, &o); err != nil {
		return storage.Decoded{}, fmt.Errorf("decode labels: %w", err)
	}
	return storage.Decoded{Labels: o.Labels}, nil
}

// setupCacher100k stores 100k ~300-byte objects in 100 namespaces and
// starts a cacher on them, measuring the heap it retains per object.
func setupCacher100k(b *testing.B) *storage.Cacher {
	bench100k.once.Do(func() {
		prefix := "/bench/list100k/"
		if bench100k.err = loadObjects(newStore(), prefix, benchObjects); bench100k.err != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		var raw *storage.Cacher
		raw, bench100k.rawBytesPerObj, bench100k.err = measureCacher(ctx, prefix, nil)
		cancel()
		if bench100k.err != nil {
			return
		}
		runtime.KeepAlive(raw)
		// Runs for the rest of the test binary; TestMain closes etcd.
		bench100k.cacher, bench100k.labelBytesPerObj, bench100k.err = measureCacher(context.Background(), prefix, decodeLabels)
	})
	if bench100k.err != nil {
		b.Fatal(bench100k.err)
	}
	return bench100k.cacher
}

// measureCacher starts a cacher on prefix and returns the heap growth per
// object once it is filled.
func measureCacher(ctx context.Context, prefix string, decode storage.DecodeFunc) (*storage.Cacher, float64, error) {
	// Warm etcd's and gRPC's own buffers with the same paged list, so the
	// heap growth below is the cacher's.
	for opts := (storage.ListOptions{Limit: 10000}); ; {
		res, err := newStore().List(ctx, prefix, opts)
		if err != nil {
			return nil, 0, err
		}
		if opts.Continue = res.Continue; opts.Continue == "" {
			break
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := storage.NewCacher(newStore(), prefix, decode, storage.CacherOptions{Logger: storagetest.QuietLogger()})
	if err := c.Start(ctx); err != nil {
		return nil, 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		return nil, 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return c, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchObjects, nil
}

// loadObjects writes n objects with 8 writers of 128-op transactions.
func loadObjects(s *storage.Store, prefix string, n int) error {
	const batch, writers = 128, 8
	pad := string(bytes.Repeat([]byte("p"), 220))
	var next atomic.Int64
	errs := make(chan error, writers)
	for range writers {
		go func() {
			for {
				start := int(next.Add(batch)) - batch
				if start >= n {
					errs <- nil
					return
				}
				var ops []storage.Op
				for i := start; i < min(start+batch, n); i++ {
					key := fmt.Sprintf("%sns%02d/obj-%06d", prefix, i%100, i)
					ops = append(ops, storage.Put(key, encodeObj(map[string]string{"app": "bench", "shard": fmt.Sprint(i % 7)}, pad)))
				}
				if _, err := s.Txn(context.Background(), ops); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			return fmt.Errorf("load bench objects: %w", err)
		}
	}
	return nil
}

// BenchmarkCacherList100k lists 100k cached small objects (all, and one
// namespace of 1000) and reports the heap retained per cached object.
func BenchmarkCacherList100k(b *testing.B) {
	c := setupCacher100k(b)
	ctx := testCtx(b)
	for _, tc := range []struct {
		name, sub string
		want      int
	}{{"all", "", benchObjects}, {"namespace", "ns42/", benchObjects / 100}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				objs, _, err := c.List(ctx, tc.sub, 0, nil)
				if err != nil {
					b.Fatal(err)
				}
				if len(objs) != tc.want {
					b.Fatalf("listed %d objects, want %d", len(objs), tc.want)
				}
			}
			b.ReportMetric(bench100k.rawBytesPerObj, "B/object-raw")
			b.ReportMetric(bench100k.labelBytesPerObj, "B/object-labels")
		})
	}
}

// BenchmarkWatchFanout100 measures the latency from the start of a write
// to its delivery at each of 100 cacher watchers.
func BenchmarkWatchFanout100(b *testing.B) {
	const watchers = 100
	ctx, s := testCtx(b), newStore()
	p := fmt.Sprintf("/bench/fanout/%d/", time.Now().UnixNano())
	c := startCacher(b, s, p, storage.CacherOptions{})
	created := must[int64](b)(s.Create(ctx, p+"obj", encodeObj(nil, "0")))
	// One write is in flight at a time, so a single start time suffices.
	var writeStart atomic.Int64
	lat := make(chan time.Duration, watchers)
	for range watchers {
		ch, err := c.Watch(ctx, "", created, nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range ch {
				lat <- time.Duration(time.Now().UnixNano() - writeStart.Load())
			}
		}()
	}
	samples := make([]time.Duration, 0, b.N*watchers)
	b.ResetTimer()
	for i := range b.N {
		writeStart.Store(time.Now().UnixNano())
		must[int64](b)(s.Update(ctx, p+"obj", encodeObj(nil, fmt.Sprint(i)), 0))
		for range watchers {
			select {
			case d := <-lat:
				samples = append(samples, d)
			case <-time.After(time.Minute):
				b.Fatal("watcher did not receive the event within a minute")
			}
		}
	}
	b.StopTimer()
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-us")
}
