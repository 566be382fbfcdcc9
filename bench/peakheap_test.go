package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"testing"
	"time"
)

// watchPeakHeap writes, when ALLOT_BENCH_HEAPPROFILE names a directory,
// a heap profile (the live heap of the last collection, by allocation
// site) each time the heap's objects reach a new high, 5 % above the
// last profiled, to DIR/NAME-peak.pb.gz: the profile left at the end is
// the one nearest the peak. It stops with ctx.
func watchPeakHeap(ctx context.Context, b *testing.B, name string) {
	dir := os.Getenv("ALLOT_BENCH_HEAPPROFILE")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, name+"-peak.pb.gz")
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		var high uint64
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				b.Logf("peak heap objects %.0f MiB, profile %s", float64(high)/(1<<20), path)
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > high+high/20 {
				high = v
				f, err := os.Create(path)
				if err != nil {
					b.Logf("heap profile: %v", err)
					return
				}
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
}
