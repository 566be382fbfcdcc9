package runc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rt "allot.dev/allot/internal/node/runtime"
)

// TestMain lets the test binary act as the shim (the default shim command
// is this executable plus "runc-shim") and as a short-lived agent for the
// agent-death test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ShimCommandName {
		os.Exit(ShimMain(os.Args[2:]))
	}
	if root := os.Getenv(agentEnv); root != "" {
		os.Exit(agentMain(root))
	}
	os.Exit(m.Run())
}

var setupOnce sync.Once

// requireRunc fails (CI=true) or installs Debian's runc and busybox-static
// when they are missing, and skips when not root.
func requireRunc(t *testing.T) {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	if os.Geteuid() != 0 {
		if ci {
			t.Fatal("runc tests need root")
		}
		t.Skip("runc tests need root")
	}
	missing := func() bool {
		_, err1 := exec.LookPath("runc")
		_, err2 := os.Stat("/bin/busybox")
		return err1 != nil || err2 != nil
	}
	if !missing() {
		return
	}
	if ci {
		t.Fatal("runc or /bin/busybox missing: install them first (apt-get install -y runc busybox-static)")
	}
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "apt-get", "install", "-y", "runc", "busybox-static").CombinedOutput()
		if err != nil {
			t.Logf("apt-get install runc busybox-static: %v\n%s", err, out)
		}
	})
	if missing() {
		t.Fatal("runc or /bin/busybox missing and apt-get could not install them")
	}
}

// newTestRuntime makes a runtime over root (a fresh temp dir if empty) and
// removes every container it has when the test ends.
func newTestRuntime(t *testing.T, root string, opts ...func(*Options)) *Runtime {
	t.Helper()
	requireRunc(t)
	if root == "" {
		root = t.TempDir()
	}
	o := Options{RootDir: root, CDISpecDirs: []string{filepath.Join(root, "cdi")}}
	for _, f := range opts {
		f(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { cleanupContainers(t, r) })
	return r
}

func cleanupContainers(t *testing.T, r *Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := r.List(ctx)
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, c := range list {
		if err := r.Remove(ctx, c.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if states, err := r.runc.list(ctx); err == nil {
		for id := range states {
			_ = r.runc.delete(ctx, id)
			t.Errorf("cleanup: runc container %s had no bundle", id)
		}
	}
}

// spec is a busybox container spec for the test with a log in a temp dir.
func spec(t *testing.T, name string, command ...string) rt.ContainerSpec {
	return rt.ContainerSpec{
		PodUID: "uid-" + name, PodNamespace: "default", PodName: "pod-" + name, Name: name,
		Image: "busybox", Command: command, LogPath: filepath.Join(t.TempDir(), "logs", name+".log"),
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// run creates and starts a container and returns its ID.
func run(t *testing.T, r *Runtime, cs rt.ContainerSpec) string {
	t.Helper()
	ctx := ctxT(t)
	id, err := r.Create(ctx, cs)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := r.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return id
}

// waitExited polls Status until the container exited.
func waitExited(t *testing.T, r *Runtime, id string) rt.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := r.Status(ctxT(t), id)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.State == rt.StateExited {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still %s after 30s", id, st.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readLog(t *testing.T, cs rt.ContainerSpec) string {
	t.Helper()
	data, err := os.ReadFile(cs.LogPath)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return string(data)
}

func wantLog(t *testing.T, cs rt.ContainerSpec, lines ...string) {
	t.Helper()
	log := readLog(t, cs)
	for _, l := range lines {
		if !strings.Contains(log, l+"\n") {
			t.Errorf("log lacks line %q; log:\n%s", l, log)
		}
	}
}

// agentEnv names the root dir when the test binary runs as a throw-away
// agent: it creates and starts a container, prints its ID, and waits to be
// killed.
const agentEnv = "ALLOT_RUNC_TEST_AGENT_ROOT"

func agentMain(root string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := New(Options{RootDir: root})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cs := rt.ContainerSpec{PodUID: "uid-agent", PodNamespace: "default", PodName: "pod-agent", Name: "agent",
		Image: "busybox", Command: []string{"sh", "-c", os.Getenv(agentEnv + "_CMD")},
		LogPath: filepath.Join(root, "agent.log")}
	id, err := r.Create(ctx, cs)
	if err == nil {
		err = r.Start(ctx, id)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(id)
	time.Sleep(time.Minute) // the test kills us with SIGKILL
	return 0
}
