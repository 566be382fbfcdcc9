package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

func TestDescribePodShowsEvents(t *testing.T) {
	ns := applyFixture(t, "describe")
	c, ctx := newTestClient(t), testCtx(t)
	pod, err := c.Pods(ns).Get(ctx, "web")
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	rec := client.NewEventRecorder(c, "test-scheduler", "")
	rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/1 nodes are available")
	rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/1 nodes are available")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec.Shutdown(sctx)

	out := allot(t, "describe", "pod", "web", "-n", ns)
	for _, want := range []string{
		"Name:         web\n", "Namespace:    " + ns + "\n", "Labels:       app=web\n",
		"Status:", "Pending", "Containers:\n  c:\n    Image:", "busybox",
		"Events:\n", "Type     Reason            Age", "From            Message",
		"Warning  FailedScheduling", "(x2 over", "test-scheduler  0/1 nodes are available",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, lastAppliedAnnotation) {
		t.Fatalf("describe shows the last-applied annotation:\n%s", out)
	}
}

func TestDescribeOtherKinds(t *testing.T) {
	ns := applyFixture(t, "describe-kinds")
	claim := allot(t, "describe", "resourceclaim", "gpu", "-n", ns)
	for _, want := range []string{"Resource Class:", "gpu-class", "Allocation Mode:", "WaitForFirstConsumer", "Allocation:", "Reserved For:", "Events:"} {
		if !strings.Contains(claim, want) {
			t.Fatalf("claim description lacks %q:\n%s", want, claim)
		}
	}
	desc := allot(t, "describe", "namespace", ns)
	for _, want := range []string{"Name:", ns, "Spec:\n  Finalizers:\n    - kubernetes\n", "Status:\n  Phase:", "Active"} {
		if !strings.Contains(desc, want) {
			t.Fatalf("generic description lacks %q:\n%s", want, desc)
		}
	}
}
