package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

func TestDeleteWaitsUntilGone(t *testing.T) {
	ns := uniqueName("delete-wait")
	allot(t, "apply", "-f", writeManifest(t, "held.yaml", `apiVersion: v1
kind: Namespace
metadata: {name: `+ns+`}
---
apiVersion: v1
kind: Pod
metadata:
  name: held
  namespace: `+ns+`
  finalizers: [example.com/hold]
spec: {containers: [{name: c, image: busybox}]}
`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, allotBin, "delete", "pod", "held", "-n", ns, "--timeout", "20s")
	cmd.Env = testCluster.Env()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start delete: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("delete returned (%v) while a finalizer holds the pod", err)
	case <-time.After(time.Second):
	}
	c := newTestClient(t)
	if _, err := c.Pods(ns).Patch(testCtx(t), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)); err != nil {
		t.Fatalf("remove finalizer: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("delete did not return once the pod was gone")
	}
	if out.String() != "pod \"held\" deleted\n" {
		t.Fatalf("delete printed %q", out.String())
	}
	if _, err := c.Pods(ns).Get(testCtx(t), "held"); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there: %v", err)
	}
}

func TestDeleteTimesOut(t *testing.T) {
	name := uniqueName("stuck")
	allot(t, "apply", "-f", writeManifest(t, "stuck.yaml", `apiVersion: v1
kind: Pod
metadata: {name: `+name+`, namespace: default, finalizers: [example.com/hold]}
spec: {containers: [{name: c, image: busybox}]}
`))
	stderr := allotFails(t, "delete", "po", name, "--timeout", "1s")
	if !strings.Contains(stderr, `timed out waiting for pod "`+name+`" to be deleted`) {
		t.Fatalf("stderr = %q", stderr)
	}
	c := newTestClient(t)
	if _, err := c.Pods("default").Patch(testCtx(t), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)); err != nil {
		t.Fatalf("remove finalizer: %v", err)
	}
}

func TestDeleteFromFileAndByName(t *testing.T) {
	ns := uniqueName("delete-file")
	file := writeManifest(t, "fixture.yaml", fmt.Sprintf(podAndClaim, ns))
	allot(t, "apply", "-f", file)
	got := allot(t, "delete", "resourceclaim.resource.k8s.io/gpu", "po/web", "-n", ns)
	if got != "resourceclaim.resource.k8s.io \"gpu\" deleted\npod \"web\" deleted\n" {
		t.Fatalf("delete printed %q", got)
	}
	// db is bound to a node without an agent: only --grace-period 0 removes it at once.
	if got := allot(t, "delete", "pod", "db", "-n", ns, "--grace-period", "0"); got != "pod \"db\" deleted\n" {
		t.Fatalf("delete printed %q", got)
	}
	r := runCLI(t, "", "delete", "-f", file, "--wait=false")
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || !strings.Contains(r.stdout, "namespace \""+ns+"\" deleted") || !strings.Contains(r.stderr, `pods "web" not found`) {
		t.Fatalf("delete -f: err %v stdout %q stderr %q", r.err, r.stdout, r.stderr)
	}
	if got := allot(t, "delete", "pod", "web", "-n", ns, "--ignore-not-found"); got != "" {
		t.Fatalf("--ignore-not-found printed %q", got)
	}
}

func TestLogsOfUnscheduledPod(t *testing.T) {
	ns := applyFixture(t, "logs")
	if stderr := allotFails(t, "logs", "web", "-n", ns); stderr != "error: pod web is not scheduled to a node yet\n" {
		t.Fatalf("stderr = %q", stderr)
	}
	if stderr := allotFails(t, "logs", "pod/missing", "-n", ns); stderr != "error: pods \"missing\" not found\n" {
		t.Fatalf("stderr = %q", stderr)
	}
}
