package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/pkg/client"
)

// BenchmarkDRA runs the workloads of Kubernetes' DRA scheduler benchmarks
// (test/integration/scheduler_perf/dra) on allot: pods with one claim
// each from a ResourceClaimTemplate, on simulated nodes that each publish
// a NodeResourceSlice of ten instances of one driver, through the API
// server and etcd, the claim controller (which creates each pod's claim
// and frees claims of deleted pods) and the scheduler (which allocates
// and binds in one transaction).
//
//   - PODSpods_NODESnodes (SchedulingWithResourceClaimTemplate): half the
//     pods fill the cluster, then the other half, created at a steady rate
//     by 16 clients, is measured. Node status writes off (Kubernetes'
//     benchmark has no kubelet), then on.
//   - SteadyState/{empty,half,full}_NODESnodes
//     (SteadyStateClusterResourceClaimTemplate): 0, half of, or all but
//     ten of the instances are in use; batches of ten pods are created,
//     and once all ten are bound they are force-deleted (grace period 0:
//     there is no kubelet to finish a graceful deletion) and the next
//     batch is created, for ALLOT_BENCH_DURATION.
//
// Sizes: ALLOT_BENCH_NODES (500), ALLOT_BENCH_PODS (5000),
// ALLOT_BENCH_RATE (arrival rate, 1000/s), ALLOT_BENCH_DURATION (steady
// state; default 10s scaled by PODS/5000, at least 1s).
// ALLOT_BENCH_PROGRESS=1 logs, each second of the 5000pods shapes, where
// the pods wait (see progress). ALLOT_BENCH_HEAPPROFILE=path writes a heap
// profile at the highest live heap until every pod is bound
// (watchHeapPeak; PODSpods_NODESnodes only). ALLOT_BENCH_API=v1 runs the
// same workload in resource.k8s.io/v1: each node publishes a v1
// ResourceSlice of the same ten devices (schedtest.BenchResourceSlice),
// claims come from v1 templates over one DeviceClass, and the steady
// states' claims in use are v1 claims.
func BenchmarkDRA(b *testing.B) {
	nodes, pods := envInt("ALLOT_BENCH_NODES", 500), envInt("ALLOT_BENCH_PODS", 5000)
	b.Run(fmt.Sprintf("%dpods_%dnodes", pods, nodes), func(b *testing.B) {
		for _, statusWrites := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodeStatusWrites=%v", statusWrites), func(b *testing.B) {
				for range b.N {
					runDRATemplate(b, nodes, pods, statusWrites)
				}
			})
		}
	})
	duration := steadyDuration(b, pods)
	b.Run("SteadyState", func(b *testing.B) {
		slots := nodes * draDevices
		for _, level := range []struct {
			name  string
			inUse int
		}{{"empty", 0}, {"half", slots / 2}, {"full", max(slots-steadyBatch, 0)}} {
			b.Run(fmt.Sprintf("%s_%dnodes", level.name, nodes), func(b *testing.B) {
				for range b.N {
					runDRASteadyState(b, nodes, level.inUse, duration, max(pods/2, 200))
				}
			})
		}
	})
}

// steadyBatch is the number of pods per steady-state batch (Kubernetes'
// count: 10).
const steadyBatch = 10

// steadyDuration is ALLOT_BENCH_DURATION, or 10s scaled by pods/5000 so
// that CI's small smoke run stays short.
func steadyDuration(b *testing.B, pods int) time.Duration {
	if v := os.Getenv("ALLOT_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("ALLOT_BENCH_DURATION=%q: want a positive duration such as 10s", v)
		}
		return d
	}
	return max(10*time.Second*time.Duration(pods)/5000, time.Second)
}

// runDRATemplate is SchedulingWithResourceClaimTemplate: pods/2 pods fill
// namespace "init", then the rest are measured in namespace "test".
func runDRATemplate(b *testing.B, nodes, pods int, statusWrites bool) {
	resetPeakRSS(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopHeap := watchHeapPeak(ctx, b)
	cl := startDRACluster(ctx, b, nodes, statusWrites)
	for _, ns := range []string{"init", "test", "ceiling"} {
		cl.addNamespace(ctx, b, ns)
	}
	w := watchBindings(ctx, b, cl.c)
	cl.progress(ctx, b, w, time.Second)
	interval := time.Second / time.Duration(envInt("ALLOT_BENCH_RATE", 1000))
	timeout := 10*time.Minute + time.Duration(pods)*100*time.Millisecond

	fill := podNames("pod", 0, pods/2)
	fillStart := time.Now()
	createPods(ctx, b, cl.c, "init", fill, benchClients, interval)
	w.wait(ctx, b, cl.c, "init", fill, timeout)
	b.Logf("fill: %d pods bound in %s", len(fill), time.Since(fillStart).Round(time.Millisecond))
	cl.check(b)

	cl.e.settledWrites(b) // the fill's trailing event writes, before anything is measured
	// The ceiling: two samples before the measured pods and two after
	// (this shared machine's speed drifts within seconds; see
	// runDRASteadyState), of as many creates in all as the workload has
	// pods, about half as long as the measured pods take. The samples'
	// pods are deleted after each sample, so that every sample and the
	// measured pods see the cluster the workload describes.
	ceilingN := max(pods/2, 100)
	ceil := ceilingSamples{after: func(round string, n int) {
		deleteCeiling(ctx, b, cl.c, "ceiling", round, benchClients, n)
		cl.e.settledWrites(b) // and the components have seen the deletes
	}}
	ceil.measure(ctx, b, cl.c, benchClients, ceilingN)
	ceil.measure(ctx, b, cl.c, benchClients, ceilingN)
	measured := podNames("pod", 0, pods-len(fill))
	writes0, cycles0 := cl.e.writeCounts(b), schedulerCycles(b, cl.sched)
	created := createPods(ctx, b, cl.c, "test", measured, benchClients, interval)
	bound := w.wait(ctx, b, cl.c, "test", measured, timeout)
	writes, cycles := diffWrites(writes0, cl.e.settledWrites(b), len(measured)), diffCycles(cycles0, schedulerCycles(b, cl.sched), len(measured))
	cl.check(b)
	checkAllocations(ctx, b, cl.c, pods)
	stopHeap()
	ceil.measure(ctx, b, cl.c, benchClients, ceilingN)
	ceil.measure(ctx, b, cl.c, benchClients, ceilingN)
	b.Logf("API creates at %d clients: %s", benchClients, &ceil)
	draResult{
		created: created, bound: bound, createRate: ceil.rate(), clients: benchClients,
		writes: writes, cycles: cycles,
	}.report(b)
}

// runDRASteadyState is SteadyStateClusterResourceClaimTemplate with inUse
// instances held by preallocated claims.
//
// The ceiling is sampled between the batches, about every
// steadyCeilingEvery of measured time, and before and after them: this
// shared machine's speed moves by a third within seconds (consecutive
// samples of 1,250 creates ranged from 888 to 2,604/s in one minute), so
// a ceiling measured only before and after the batches compared them
// with another machine. Before each sample the pipeline's writes settle,
// as before the first; the batch after a sample is left out of the
// measurement (not of the writes per pod), since it starts on a machine
// without the previous batch's trailing work.
func runDRASteadyState(b *testing.B, nodes, inUse int, duration time.Duration, ceilingN int) {
	resetPeakRSS(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := startDRACluster(ctx, b, nodes, false)
	for _, ns := range []string{"init", "test", "ceiling"} {
		cl.addNamespace(ctx, b, ns)
	}
	cl.preallocate(ctx, b, "init", inUse)
	w := watchBindings(ctx, b, cl.c)

	// One batch first, unmeasured, so that every component has seen the
	// preallocated claims.
	seq := 0
	runSteadyBatch(ctx, b, cl, w, &seq)
	waitClaimsReleased(ctx, b, cl.c, "test", time.Minute)
	cl.e.settledWrites(b)

	var ceil ceilingSamples
	sampleN := max(ceilingN/8, 50)
	ceil.measure(ctx, b, cl.c, steadyBatch, max(ceilingN/2, 100))
	writes0, cycles0 := cl.e.writeCounts(b), schedulerCycles(b, cl.sched)
	var created, bound []time.Time
	var elapsed, sinceSample time.Duration
	pods, between, skip := 0, 0, false
	for elapsed < duration {
		start := time.Now()
		c, bd := runSteadyBatch(ctx, b, cl, w, &seq)
		pods += len(c)
		if skip {
			skip = false
			continue
		}
		d := time.Since(start)
		elapsed, sinceSample = elapsed+d, sinceSample+d
		created, bound = append(created, c...), append(bound, bd...)
		if sinceSample >= steadyCeilingEvery && elapsed < duration {
			waitClaimsReleased(ctx, b, cl.c, "test", time.Minute)
			cl.e.settledWrites(b)
			ceil.measure(ctx, b, cl.c, steadyBatch, sampleN)
			between += sampleN
			sinceSample, skip = 0, true
		}
	}
	// The claim controller's writes for the last batch belong to it.
	waitClaimsReleased(ctx, b, cl.c, "test", time.Minute)
	after := cl.e.settledWrites(b)
	after["create pods 201"] -= float64(between) // the samples' creates
	writes, cycles := diffWrites(writes0, after, pods), diffCycles(cycles0, schedulerCycles(b, cl.sched), pods)
	cl.check(b)
	checkAllocations(ctx, b, cl.c, inUse)
	ceil.measure(ctx, b, cl.c, steadyBatch, max(ceilingN/2, 100))
	b.Logf("API creates at %d clients: %s", steadyBatch, &ceil)
	draResult{
		created: created, bound: bound, elapsed: elapsed, createRate: ceil.rate(), clients: steadyBatch,
		writes: writes, cycles: cycles,
	}.report(b)
}

// steadyCeilingEvery is the measured time between two samples of the
// ceiling in the steady state.
const steadyCeilingEvery = time.Second

// ceilingSamples are measurements of the ceiling's create rate; rate is
// all their creates over all their time.
type ceilingSamples struct {
	n     int
	secs  float64
	rates []float64
	after func(round string, n int) // when set, runs after each sample
}

func (s *ceilingSamples) measure(ctx context.Context, b *testing.B, c *client.Client, clients, n int) {
	b.Helper()
	round := strconv.Itoa(len(s.rates))
	r := measureCeiling(ctx, b, c, "ceiling", round, clients, n)
	s.n, s.secs, s.rates = s.n+n, s.secs+float64(n)/r, append(s.rates, r)
	if s.after != nil {
		s.after(round, n)
	}
}

func (s *ceilingSamples) rate() float64 { return float64(s.n) / s.secs }

func (s *ceilingSamples) String() string {
	parts := make([]string, len(s.rates))
	for i, r := range s.rates {
		parts[i] = strconv.FormatFloat(r, 'f', 0, 64)
	}
	return fmt.Sprintf("samples %s/s; %.0f/s over all", strings.Join(parts, " "), s.rate())
}

// runSteadyBatch creates steadyBatch pods at once, waits until all are
// bound, and force-deletes them.
func runSteadyBatch(ctx context.Context, b *testing.B, cl *draCluster, w *bindings, seq *int) (created, bound []time.Time) {
	b.Helper()
	names := podNames("pod", *seq, steadyBatch)
	*seq += steadyBatch
	created = createPods(ctx, b, cl.c, "test", names, steadyBatch, 0)
	bound = w.wait(ctx, b, cl.c, "test", names, 2*time.Minute)
	zero := int64(0)
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Go(func() {
			if err := cl.c.Pods("test").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				errs <- fmt.Errorf("delete pod test/%s: %w", n, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return created, bound
}
