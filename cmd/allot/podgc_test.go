package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// TestPodGarbageCollection runs `allot controller-manager` with a fast pod
// garbage collector (every 100 ms, a 300 ms quarantine, two terminated
// pods kept) against a control plane without node agents, and checks each
// of its rules: a pod bound to a node that never existed is marked Failed
// (DisruptionTarget, DeletionByPodGC) and deleted; a pod terminating on a
// NotReady node tainted out-of-service is deleted; the oldest terminated
// pods beyond the threshold are deleted; a pod terminating on a live node
// and a running pod are left alone.
func TestPodGarbageCollection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := clienttest.Start(ctx, allotBin, dir, "--disable", "scheduler,node,controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	c, err := client.NewForKubeconfig(cl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := "podgc"
	if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	node := func(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) {
		n, err := c.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now()}}
		if _, err := c.Nodes().UpdateStatus(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	node("gc-live", corev1.ConditionTrue)
	node("gc-oos", corev1.ConditionFalse, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	pod := func(name, nodeName string, phase corev1.PodPhase, terminating bool) {
		p, err := c.Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		if phase != "" {
			p.Status.Phase = phase
			if _, err := c.Pods(ns).UpdateStatus(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		if terminating {
			if err := c.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod("orphan", "gc-gone", "", false)
	pod("oos-terminating", "gc-oos", corev1.PodRunning, true)
	pod("live-terminating", "gc-live", corev1.PodRunning, true)
	pod("running", "gc-live", corev1.PodRunning, false)
	for i := range 4 {
		// Created in name order: creation timestamps (whole seconds) never
		// decrease, and the collector breaks ties by name, so done-0 and
		// done-1 are the oldest.
		pod(fmt.Sprintf("done-%d", i), "gc-live", corev1.PodSucceeded, false)
	}

	kc := componentKubeconfig(ctx, t, cl, dir, "controller-manager", "podgc-cm")
	metricsAddr := freeLoopbackAddr(t)
	startComponent(t, dir, "cm", nil, "controller-manager", "--kubeconfig", kc, "--pod-gc-period", "100ms",
		"--pod-gc-orphan-quarantine", "300ms", "--terminated-pod-gc-threshold", "2", "--metrics-listen", metricsAddr)

	want := map[string]bool{"orphan": true, "oos-terminating": true, "done-0": true, "done-1": true}
	var orphanLast *corev1.Pod
	for len(want) > 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended with %v not deleted", want)
			}
			p, _ := ev.Object.(*corev1.Pod)
			if p == nil {
				continue
			}
			if p.Name == "orphan" {
				orphanLast = p
			}
			if ev.Type == watch.Deleted {
				if !want[p.Name] {
					t.Fatalf("pod %s deleted", p.Name)
				}
				delete(want, p.Name)
			}
		case <-ctx.Done():
			t.Fatalf("pods %v not deleted", want)
		}
	}
	if orphanLast.Status.Phase != corev1.PodFailed || !strings.Contains(fmt.Sprint(orphanLast.Status.Conditions), "DeletionByPodGC") {
		t.Errorf("orphan deleted as %s %v, want Failed with DisruptionTarget DeletionByPodGC", orphanLast.Status.Phase, orphanLast.Status.Conditions)
	}
	// Its metrics count each deletion by reason.
	waitMetrics(ctx, t, "http://"+metricsAddr+"/metrics",
		`pod_gc_collector_force_delete_pods_total{namespace="podgc",reason="orphaned"} 1`,
		`pod_gc_collector_force_delete_pods_total{namespace="podgc",reason="terminating_out_of_service"} 1`,
		`pod_gc_collector_force_delete_pods_total{namespace="podgc",reason="terminated"} 2`)
	// The others stay. Watched for 2 s: 20 collector passes, each of which
	// judged every pod, after the passes that deleted the four.
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if p, _ := ev.Object.(*corev1.Pod); p != nil && ev.Type == watch.Deleted {
				t.Fatalf("pod %s deleted", p.Name)
			}
		case <-timer.C:
			done = true
		}
	}
	for _, name := range []string{"live-terminating", "running", "done-2", "done-3"} {
		if _, err := c.Pods(ns).Get(ctx, name); apierrors.IsNotFound(err) {
			t.Errorf("pod %s deleted", name)
		}
	}
}

// freeLoopbackAddr is a free 127.0.0.1 address for a component to listen on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitMetrics waits until a component's /metrics at url has every line
// of want.
func waitMetrics(ctx context.Context, t *testing.T, url string, want ...string) {
	t.Helper()
	var body string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			lines := strings.Split(body, "\n")
			if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(lines, w) }) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s lacks some of %q:\n%s", url, want, body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
