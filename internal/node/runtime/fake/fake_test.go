package fake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rt "allot.dev/allot/internal/node/runtime"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func spec(name string, annotations map[string]string) rt.ContainerSpec {
	return rt.ContainerSpec{PodUID: "uid-" + name, PodNamespace: "ns", PodName: "pod-" + name, Name: name,
		Image: "busybox", Command: []string{"sh", "-c", "exit 9"}, Annotations: annotations}
}

func mustNew(t *testing.T, o Options) *Runtime {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func createStart(t *testing.T, r *Runtime, cs rt.ContainerSpec) string {
	t.Helper()
	ctx := context.Background()
	id, err := r.Create(ctx, cs)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := r.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return id
}

func status(t *testing.T, r *Runtime, id string) rt.ContainerStatus {
	t.Helper()
	st, err := r.Status(context.Background(), id)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	r := mustNew(t, Options{Now: clk.now})
	cs := spec("web", nil)
	cs.LogPath = filepath.Join(t.TempDir(), "logs", "web.log")
	id, err := r.Create(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if st := status(t, r, id); st.State != rt.StateCreated || st.PodUID != "uid-web" || !st.CreatedAt.Equal(clk.now()) {
		t.Fatalf("after Create: %+v", st)
	}
	clk.add(time.Second)
	if err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, id); err == nil {
		t.Fatal("second Start succeeded")
	}
	clk.add(time.Hour) // the command "exit 9" is not interpreted
	if st := status(t, r, id); st.State != rt.StateRunning || !st.StartedAt.Equal(clk.now().Add(-time.Hour)) {
		t.Fatalf("after Start: %+v", st)
	}
	if err := r.Stop(ctx, id, time.Minute); err != nil {
		t.Fatal(err)
	}
	st := status(t, r, id)
	if st.State != rt.StateExited || st.ExitCode != 0 || st.Reason != "Completed" || !st.FinishedAt.Equal(clk.now()) {
		t.Fatalf("after Stop: %+v", st)
	}
	if err := r.Stop(ctx, id, 0); err != nil {
		t.Fatalf("Stop of an exited container: %v", err)
	}
	if log, err := os.ReadFile(cs.LogPath); err != nil || !strings.Contains(string(log), "started") {
		t.Fatalf("log = %q, %v", log, err)
	}
	if err := r.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Status(ctx, id); !errors.Is(err, rt.ErrNotFound) {
		t.Fatalf("Status after Remove: %v", err)
	}
	if err := r.Remove(ctx, id); !errors.Is(err, rt.ErrNotFound) {
		t.Fatalf("second Remove: %v", err)
	}
}

func TestScriptedBehaviour(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	r := mustNew(t, Options{Now: clk.now})

	exits := createStart(t, r, spec("job", map[string]string{AnnotationExitAfter: "2s", AnnotationExitCode: "3"}))
	clk.add(1999 * time.Millisecond)
	if st := status(t, r, exits); st.State != rt.StateRunning {
		t.Fatalf("before exit-after: %+v", st)
	}
	clk.add(time.Hour)
	st := status(t, r, exits)
	if st.State != rt.StateExited || st.ExitCode != 3 || st.Reason != "Error" || st.FinishedAt.Sub(st.StartedAt) != 2*time.Second {
		t.Fatalf("after exit-after: %+v", st)
	}

	failing := spec("broken", map[string]string{AnnotationStartError: "no such binary"})
	id, err := r.Create(ctx, failing)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, id); err == nil || !strings.Contains(err.Error(), "no such binary") {
		t.Fatalf("Start = %v, want the scripted error", err)
	}
	if st := status(t, r, id); st.State != rt.StateExited || st.Reason != "StartError" || st.ExitCode != 128 {
		t.Fatalf("after start error: %+v", st)
	}
}

func TestIgnoreTermWaitsGrace(t *testing.T) {
	r := mustNew(t, Options{})
	id := createStart(t, r, spec("stubborn", map[string]string{AnnotationIgnoreTerm: "true"}))
	begin := time.Now()
	if err := r.Stop(context.Background(), id, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 100*time.Millisecond {
		t.Fatalf("Stop took %s, want the grace period", took)
	}
	if st := status(t, r, id); st.ExitCode != 137 || st.Signal != 9 || st.Reason != "Error" {
		t.Fatalf("after Stop: %+v", st)
	}
}

func TestCreateValidation(t *testing.T) {
	r := mustNew(t, Options{})
	tests := map[string]rt.ContainerSpec{
		"bad duration":  spec("a", map[string]string{AnnotationExitAfter: "soon"}),
		"bad code":      spec("b", map[string]string{AnnotationExitCode: "300"}),
		"bad bool":      spec("c", map[string]string{AnnotationIgnoreTerm: "maybe"}),
		"no image":      {PodName: "p", Name: "n"},
		"malformed CDI": func() rt.ContainerSpec { s := spec("d", nil); s.CDIDevices = []string{"gpu0"}; return s }(),
	}
	for name, cs := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := r.Create(context.Background(), cs); err == nil {
				t.Fatal("Create succeeded")
			}
		})
	}
	ok := spec("e", nil)
	ok.CDIDevices = []string{"example.com/gpu=gpu0"}
	if _, err := r.Create(context.Background(), ok); err != nil {
		t.Fatalf("Create with a CDI device: %v", err)
	}
}

// TestAdoption: a runtime over the same state dir sees the same containers.
func TestAdoption(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	first := mustNew(t, Options{StateDir: dir, Now: clk.now})
	running := createStart(t, first, spec("web", nil))
	job := createStart(t, first, spec("job", map[string]string{AnnotationExitAfter: "1m"}))
	created, err := first.Create(context.Background(), spec("later", nil))
	if err != nil {
		t.Fatal(err)
	}
	startedAt := status(t, first, running).StartedAt

	clk.add(2 * time.Minute)
	second := mustNew(t, Options{StateDir: dir, Now: clk.now})
	after, err := second.List(context.Background())
	if err != nil || len(after) != 3 {
		t.Fatalf("List = %+v, %v", after, err)
	}
	byID := map[string]rt.ContainerStatus{}
	for _, st := range after {
		byID[st.ID] = st
	}
	if st := byID[running]; st.State != rt.StateRunning || !st.StartedAt.Equal(startedAt) || st.PodName != "pod-web" {
		t.Fatalf("adopted running container: %+v", st)
	}
	if st := byID[job]; st.State != rt.StateExited || st.FinishedAt.Sub(st.StartedAt) != time.Minute {
		t.Fatalf("adopted job: %+v", st)
	}
	if st := byID[created]; st.State != rt.StateCreated {
		t.Fatalf("adopted created container: %+v", st)
	}
	if err := second.Remove(context.Background(), running); err != nil {
		t.Fatal(err)
	}
	if third := mustNew(t, Options{StateDir: dir}); len(third.containers) != 2 {
		t.Fatalf("Remove did not delete the persisted container: %d left", len(third.containers))
	}
}

// TestScale: 500 simulated nodes with 10 pods each in one process.
func TestScale(t *testing.T) {
	const nodes, pods = 500, 10
	ctx := context.Background()
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := New(Options{})
			if err != nil {
				errs <- err
				return
			}
			for p := range pods {
				cs := spec(fmt.Sprintf("n%d-p%d", n, p), map[string]string{AnnotationExitAfter: "1h"})
				id, err := r.Create(ctx, cs)
				if err == nil {
					err = r.Start(ctx, id)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			list, err := r.List(ctx)
			if err == nil && len(list) != pods {
				err = fmt.Errorf("node %d lists %d containers", n, len(list))
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d containers in %s", nodes*pods, time.Since(begin))
}
