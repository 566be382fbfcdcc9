package client_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

func deleteNow() metav1.DeleteOptions {
	zero := int64(0)
	return metav1.DeleteOptions{GracePeriodSeconds: &zero}
}

func TestBind(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	node := uniqueName("bind-node")
	if _, err := c.Nodes().Create(ctx, makeNode(node)); err != nil {
		t.Fatalf("create node: %v", err)
	}
	pod, err := c.Pods(ns).Create(ctx, makePod("p").obj())
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	rv, err := c.Bind(ctx, ns, "p", binding)
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	if rv == "" || rv == pod.ResourceVersion {
		t.Fatalf("bind resourceVersion = %q (pod was at %s)", rv, pod.ResourceVersion)
	}
	bound, err := c.Pods(ns).Get(ctx, "p")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if bound.Spec.NodeName != node || bound.ResourceVersion != rv {
		t.Fatalf("bound pod: node %q rv %s; want %s at %s", bound.Spec.NodeName, bound.ResourceVersion, node, rv)
	}
	binding.Target.Name = "elsewhere"
	if _, err := c.Bind(ctx, ns, "p", binding); !apierrors.IsConflict(err) {
		t.Fatalf("second bind: err = %v, want Conflict", err)
	}
	binding.Name = ""
	if _, err := c.Bind(ctx, ns, "missing", binding); !apierrors.IsNotFound(err) {
		t.Fatalf("bind of a missing pod: err = %v, want NotFound", err)
	}
}

func TestLogsOfUnscheduledPod(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	if _, err := c.Pods(ns).Create(ctx, makePod("idle").obj()); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	_, err := c.Logs(ctx, ns, "idle", "", false, -1)
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "not scheduled") {
		t.Fatalf("logs: err = %v, want BadRequest about scheduling", err)
	}
	if _, err := c.Logs(ctx, ns, "missing", "", false, 10); !apierrors.IsNotFound(err) {
		t.Fatalf("logs of a missing pod: err = %v, want NotFound", err)
	}
}
