package client_test

import (
	"context"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

func TestEventRecorderAggregates(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pod, err := c.Pods(ns).Create(ctx, makePod("ev").obj())
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	node, err := c.Nodes().Create(ctx, makeNode(uniqueName("event-node")))
	if err != nil {
		t.Fatalf("create node: %v", err)
	}

	rec := client.NewEventRecorder(c, "test-component", "test-host")
	for i := 0; i < 3; i++ {
		rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/%d nodes are available", 2)
	}
	rec.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "assigned to %s", node.Name)
	rec.Eventf(node, corev1.EventTypeNormal, "Registered", "node registered")
	shutdownCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	rec.Shutdown(shutdownCtx)
	if rec.Dropped() != 0 {
		t.Fatalf("dropped %d events", rec.Dropped())
	}

	list, err := c.Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=ev"})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Reason < list.Items[j].Reason })
	if len(list.Items) != 2 {
		t.Fatalf("events = %d, want 2 (aggregated FailedScheduling, Scheduled)", len(list.Items))
	}
	failed := list.Items[0]
	if failed.Reason != "FailedScheduling" || failed.Count != 3 || failed.Message != "0/2 nodes are available" {
		t.Fatalf("aggregated event: reason %s count %d message %q", failed.Reason, failed.Count, failed.Message)
	}
	ref := failed.InvolvedObject
	if ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.UID != string(pod.UID) || ref.Namespace != ns {
		t.Fatalf("involvedObject = %+v", ref)
	}
	if failed.Source.Component != "test-component" || failed.Source.Host != "test-host" || failed.LastTimestamp.IsZero() {
		t.Fatalf("source %+v lastTimestamp %v", failed.Source, failed.LastTimestamp)
	}
	nodeEvents, err := c.Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node.Name})
	if err != nil || len(nodeEvents.Items) != 1 || nodeEvents.Items[0].InvolvedObject.Kind != "Node" {
		t.Fatalf("node events = %+v, %v; want one in namespace default", nodeEvents, err)
	}
}

func TestEventRecorderNeverBlocks(t *testing.T) {
	c := newClient(t)
	rec := client.NewEventRecorder(c, "flood", "host")
	pod := makePod("flood").ns("no-such-namespace").obj()
	start := time.Now()
	for i := 0; i < 5000; i++ {
		rec.Eventf(pod, corev1.EventTypeNormal, "Flood", "event %d", i)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("5000 Eventf calls took %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rec.Shutdown(ctx)
	if rec.Dropped() == 0 {
		t.Fatal("no event was dropped, though the queue holds fewer and the namespace does not exist")
	}
	rec.Eventf(pod, corev1.EventTypeNormal, "After", "shutdown") // must not panic
}
