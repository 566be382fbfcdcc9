package bench

import (
	"context"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"testing"
	"time"
)

// watchHeapPeak writes a heap profile to ALLOT_BENCH_HEAPPROFILE, when
// set, each time a collection leaves more live heap than any before it
// (10 % more, to limit the writes), until ctx ends; the last one written
// holds what the process kept at its highest live heap, which with the
// collector's target (gctune) sets the peak RSS. The profile -memprofile
// writes comes after the cluster is stopped, too late to show it. Its
// inuse_space is of that collection; -memprofilerate sets the sampling.
// stop logs the highest live heap seen.
func watchHeapPeak(ctx context.Context, b *testing.B) (stop func()) {
	b.Helper()
	path := os.Getenv("ALLOT_BENCH_HEAPPROFILE")
	if path == "" {
		return func() {}
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var written, highest uint64
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			metrics.Read(s)
			live := s[0].Value.Uint64()
			highest = max(highest, live)
			if live <= written+written/10 {
				continue
			}
			if err := writeHeapProfile(path); err != nil {
				b.Errorf("ALLOT_BENCH_HEAPPROFILE: %v", err)
				return
			}
			written = live
		}
	}()
	return func() {
		cancel()
		<-done
		b.Logf("highest live heap %.1f MiB; heap profile of a collection that left %.1f MiB in %s",
			float64(highest)/(1<<20), float64(written)/(1<<20), path)
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
