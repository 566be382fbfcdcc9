package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSchedulerCommand runs `allot scheduler` as a process and checks that
// it binds a pod and serves its metrics.
func TestSchedulerCommand(t *testing.T) {
	bin := cliBinary(t)
	e := newEnv(t, nil, makeNode("a").Alloc("cpu", "2").Obj())
	addr := freeAddr(t)
	name := e.name + "-cli"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "scheduler", "--kubeconfig", cluster.Kubeconfig,
		"--scheduler-name", name, "--metrics-listen", addr, "--score-strategy", "MostAllocated",
		"--pod-initial-backoff", "100ms", "--pod-max-backoff", "1s", "--unschedulable-timeout", "1h")
	setProcAttr(cmd)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt) // only this PID
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("allot scheduler log:\n%s", logs.String())
		}
	}()
	e.createPod(makePod("p").Req("cpu", "1").SchedulerName(name))
	p, err := e.c.Pods(e.ns).Get(callCtx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.SchedulerName != name {
		t.Fatalf("schedulerName = %s", p.Spec.SchedulerName)
	}
	e.waitBound("p")
	var metrics string
	e.eventually("metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		// The binding's duration is observed after the API answered, so
		// possibly after the pod shows bound.
		return strings.Contains(metrics, `allot_scheduler_schedule_attempts_total{result="scheduled"} 1`) &&
			strings.Contains(metrics, "allot_scheduler_binding_duration_seconds_count")
	})
	for _, want := range []string{"allot_scheduler_pending_pods{queue=\"active\"} 0", "allot_scheduler_binding_duration_seconds_count"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
