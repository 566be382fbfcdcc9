package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/pkg/client"
)

// startFleet runs count simulated nodes PREFIX-i until the test ends.
func startFleet(t *testing.T, c *client.Client, prefix string, count int, statusUpdates bool) {
	t.Helper()
	m := metrics.New(nil)
	cfgs := make([]node.Config, count)
	for i := range cfgs {
		rt, err := fake.New(fake.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = node.Config{
			NodeName: fmt.Sprintf("%s-%d", prefix, i), Hostname: fmt.Sprintf("%s-%d", prefix, i), Client: c, Runtime: rt,
			Labels: map[string]string{"fleet": prefix}, DisableEvents: true, DisableStatusUpdates: !statusUpdates,
			Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		fastTimers(&cfgs[i])
		cfgs[i].HeartbeatInterval = 2 * time.Second
		cfgs[i].RelistInterval = 200 * time.Millisecond
	}
	f, err := node.NewFleet(c, cfgs)
	if err != nil {
		t.Fatalf("NewFleet: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fleet Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("fleet did not stop")
		}
	})
}

func waitFleetReady(t *testing.T, c *client.Client, prefix string, count int) {
	t.Helper()
	eventually(t, 120*time.Second, fmt.Sprintf("%d simulated nodes Ready", count), func() (bool, string) {
		list, err := c.Nodes().List(callContext(t), metav1.ListOptions{LabelSelector: "fleet=" + prefix})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range list.Items {
			if r := readyCondition(&list.Items[i]); r != nil && r.Status == corev1.ConditionTrue {
				ready++
			}
		}
		return ready == count, fmt.Sprintf("%d of %d ready", ready, count)
	})
}

func heapInUse() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func TestSimulatedNodesRunPods(t *testing.T) {
	needCluster(t)
	const nodes, podsPerNode = 50, 2
	c := newClient(t)
	ns := newNamespace(t, c)
	prefix := "sim-" + fmt.Sprint(time.Now().UnixNano()%100000)

	before, goroutines := heapInUse(), goruntime.NumGoroutine()
	startFleet(t, c, prefix, nodes, true)
	waitFleetReady(t, c, prefix, nodes)
	time.Sleep(2 * time.Second) // let every agent start its loops before measuring
	idle, idleGoroutines := heapInUse(), goruntime.NumGoroutine()
	t.Logf("per simulated node, idle: %.1f KiB heap+stack, %.1f goroutines (fleet of %d)",
		float64(idle-min(idle, before))/1024/nodes, float64(idleGoroutines-goroutines)/nodes, nodes)

	for i := range nodes * podsPerNode {
		makePod(ns, fmt.Sprintf("p-%d", i), fmt.Sprintf("%s-%d", prefix, i%nodes)).create(t, c)
	}
	eventually(t, 120*time.Second, "every pod Running", func() (bool, string) {
		list, err := c.Pods(ns).List(callContext(t), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == nodes*podsPerNode, fmt.Sprintf("%d of %d running", n, nodes*podsPerNode)
	})
	busy := heapInUse()
	t.Logf("per simulated node with %d running pods: %.1f KiB heap+stack", podsPerNode,
		float64(busy-min(busy, before))/1024/nodes)

	zero := int64(0)
	for i := range nodes {
		if err := c.Pods(ns).Delete(callContext(t), fmt.Sprintf("p-%d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete: %v", err)
		}
	}
	for i := range nodes {
		waitPodGone(t, c, ns, fmt.Sprintf("p-%d", i))
	}
}

func TestSimulatedNodesWithoutStatusUpdates(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	prefix := "nostatus-" + fmt.Sprint(time.Now().UnixNano()%100000)
	startFleet(t, c, prefix, 2, false)
	waitFleetReady(t, c, prefix, 2)

	makePod(ns, "quiet", prefix+"-0").create(t, c)
	time.Sleep(2 * time.Second)
	p, err := c.Pods(ns).Get(callContext(t), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) != 0 || p.Status.Phase != corev1.PodPending {
		t.Fatalf("status written with status updates off: %+v", p.Status)
	}
	if err := c.Pods(ns).Delete(callContext(t), "quiet", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, c, ns, "quiet") // deletions are still completed
}
