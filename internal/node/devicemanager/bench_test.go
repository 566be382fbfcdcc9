package devicemanager

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"allot.dev/allot/internal/node/pods"
)

// BenchmarkAdmitAllocate measures one device admission end to end through
// the manager: NUMA choice, the Allocate RPC to a stub plugin over a real
// unix socket, recording and the checkpoint write; each iteration then
// releases the pod (not timed). It reports the p50 and p99 of the timed
// part. Run: go test -run '^$' -bench AdmitAllocate -benchtime 1x (or
// more iterations for stable percentiles).
func BenchmarkAdmitAllocate(b *testing.B) {
	dir := socketDir(b)
	m := startManager(b, dir)
	newStub(b, dir, "gpu.sock", gpu, dev("gpu-0", true, 0), dev("gpu-1", true, 0), dev("gpu-2", true, 1), dev("gpu-3", true, 1)).start()
	m.waitServing(b, gpu, 4)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := makePod(fmt.Sprintf("bench-%d", i)).ask("c", gpu, 2).obj()
		start := time.Now()
		a := m.Admit(ctx, pod)
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if a.Verdict != pods.Admit {
			b.Fatalf("Admit: %+v", a)
		}
		if err := m.Release(ctx, pod); err != nil {
			b.Fatalf("Release: %v", err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-us")
	b.ReportMetric(pct(0.99), "p99-us")
}
