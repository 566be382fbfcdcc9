package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/cache"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
)

const benchNodes = 500

// benchFill is how many pods a benchmark places before it starts over on
// an empty cluster, well below what the cluster holds (3,520 GPU pods).
const benchFill = 2000

// benchCluster is 500 nodes in 5 zones; every tenth is tainted and every
// fiftieth cordoned, so every plugin has work.
func benchCluster() []*corev1.Node {
	nodes := make([]*corev1.Node, benchNodes)
	for i := range nodes {
		b := makeNode(fmt.Sprintf("node-%03d", i)).Alloc("cpu", "32").Alloc("memory", "128Gi").
			Alloc("example.com/gpu", "8").Label("zone", fmt.Sprintf("zone-%d", i%5))
		if i%10 == 0 {
			b = b.Taint("dedicated", "infra", corev1.TaintEffectNoSchedule)
		}
		if i%50 == 1 {
			b = b.Unschedulable()
		}
		nodes[i] = b.Obj()
	}
	return nodes
}

// benchPod is one of a few shapes of pod.
func benchPod(i int) *corev1.Pod {
	b := makePod(fmt.Sprintf("pod-%d", i)).Req("cpu", "500m").Req("memory", "1Gi")
	switch i % 4 {
	case 1:
		b = b.NodeSelector("zone", fmt.Sprintf("zone-%d", i%5))
	case 2:
		b = b.Req("example.com/gpu", "1").Limit("example.com/gpu", "1")
	case 3:
		b = b.Toleration("dedicated", corev1.TolerationOpEqual, "infra", corev1.TaintEffectNoSchedule).
			PreferredAffinity(10, "zone", "zone-0")
	}
	return b.Obj()
}

func benchFramework(b *testing.B) *framework.Framework {
	fw, err := plugins.NewDefaultFramework(plugins.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return fw
}

// BenchmarkSchedulePods500Nodes is the pure decision rate: each iteration
// schedules one pod through the framework against an in-memory snapshot
// of 500 nodes and adds it to the snapshot, as a simulation does.
func BenchmarkSchedulePods500Nodes(b *testing.B) {
	fw := benchFramework(b)
	empty := framework.NewSnapshot(benchCluster(), nil)
	snap := empty
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchFill == 0 {
			snap = empty // immutable: starting over costs nothing
		}
		pod := benchPod(i)
		d := fw.Schedule(ctx, framework.NewCycleState(), snap, pod)
		if !d.Status.IsSuccess() {
			b.Fatalf("pod %d: %s", i, d.Message())
		}
		pod.Spec.NodeName = d.Selected
		var err error
		if snap, err = snap.WithPod(pod); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkSchedulingCycle500Nodes is one cycle of the scheduler's loop
// without the API: a snapshot from the cache, the framework, and the
// assume.
func BenchmarkSchedulingCycle500Nodes(b *testing.B) {
	fw := benchFramework(b)
	nodes := benchCluster()
	var c *cache.Cache
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchFill == 0 {
			b.StopTimer()
			c = cache.New()
			for _, n := range nodes {
				c.AddNode(n)
			}
			b.StartTimer()
		}
		pod := benchPod(i)
		d := fw.Schedule(ctx, framework.NewCycleState(), c.Snapshot(), pod)
		if !d.Status.IsSuccess() {
			b.Fatalf("pod %d: %s", i, d.Message())
		}
		pod.Spec.NodeName = d.Selected
		if err := c.AssumePod(pod); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkDiagnose500Nodes is `allot explain`'s work for one pod: every
// filter on every node, every feasible node scored.
func BenchmarkDiagnose500Nodes(b *testing.B) {
	fw := benchFramework(b)
	snap := framework.NewSnapshot(benchCluster(), nil)
	pod := benchPod(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := framework.Diagnose(context.Background(), fw, snap, pod); !d.Status.IsSuccess() {
			b.Fatal(d.Message())
		}
	}
}
