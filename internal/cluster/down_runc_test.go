package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/runc"
)

// TestMain lets the test binary act as the runc shim: Down opens the
// node's runtime with the default shim command (this executable).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == runc.ShimCommandName {
		os.Exit(runc.ShimMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// requireRunc skips (fails with CI=true) unless the test runs as root with
// runc and /bin/busybox installed (hack/setup.sh installs them).
func requireRunc(t *testing.T) {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	skip := t.Skip
	if ci {
		skip = t.Fatal
	}
	if os.Geteuid() != 0 {
		skip("runc tests need root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		skip("runc not installed (hack/setup.sh installs it)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		skip("/bin/busybox not installed (hack/setup.sh installs busybox-static)")
	}
}

// runcIDs is `runc --root ROOT list -q`.
func runcIDs(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("runc", "--root", root, "list", "-q").Output()
	if err != nil {
		t.Fatalf("runc --root %s list: %v", root, err)
	}
	return strings.Fields(string(out))
}

func startContainer(t *testing.T, ctx context.Context, r *runc.Runtime, name string, command ...string) string {
	t.Helper()
	id, err := r.Create(ctx, runtime.ContainerSpec{
		PodUID: "uid-" + name, PodNamespace: "default", PodName: name, Name: name,
		Image: "busybox", Command: command, LogPath: filepath.Join(t.TempDir(), name+".log"),
	})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if err := r.Start(ctx, id); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return id
}

// TestDownDeletesRuncState: after a kill -9 of allot up (containers left
// running under their shims, others exited), allot down leaves none of the
// data dir's containers in runc's state (a stopped one used to stay in
// `runc list`), and a container of another runc root keeps running.
func TestDownDeletesRuncState(t *testing.T) {
	requireRunc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	nodeRoot := filepath.Join(dataDir, "node")
	cdiDir := filepath.Join(t.TempDir(), "cdi")
	open := func(root string) *runc.Runtime {
		r, err := runc.New(runc.Options{RootDir: root, CDISpecDirs: []string{cdiDir}})
		if err != nil {
			t.Fatalf("runtime over %s: %v", root, err)
		}
		return r
	}
	node := open(nodeRoot)
	otherRoot := t.TempDir()
	other := open(otherRoot)
	t.Cleanup(func() { // whatever happened, leave nothing running
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, r := range []*runc.Runtime{node, other} {
			cs, _ := r.List(ctx)
			for _, c := range cs {
				_ = r.Remove(ctx, c.ID)
			}
		}
	})

	running := startContainer(t, ctx, node, "running", "sleep", "1000")
	exited := startContainer(t, ctx, node, "exited", "true")
	foreign := startContainer(t, ctx, other, "foreign", "sleep", "1000")
	for { // wait until the short one has exited
		st, err := node.Status(ctx, exited)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == runtime.StateExited {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("container %s still %s", exited, st.State)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if ids := runcIDs(t, filepath.Join(nodeRoot, "runc")); len(ids) != 2 {
		t.Fatalf("before allot down, runc lists %v under the node root; want %s and %s (the check below could not fail)", ids, running, exited)
	}

	rep, err := Down(ctx, DownOptions{DataDir: dataDir, GracePeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Down: %v (report: %s)", err, rep)
	}
	if rep.Stopped != 1 || rep.Forgotten != 2 {
		t.Errorf("report: %s; want 1 container stopped, 2 deleted from runc", rep)
	}
	if ids := runcIDs(t, filepath.Join(nodeRoot, "runc")); len(ids) != 0 {
		t.Errorf("after allot down, runc still lists %v under the data dir's node", ids)
	}
	// The bundles stay: the exit records are what the next allot up reads.
	for _, id := range []string{running, exited} {
		if st, err := node.Status(ctx, id); err != nil || st.State != runtime.StateExited {
			t.Errorf("container %s after allot down: %+v, %v; want its exit record kept", id, st, err)
		}
	}
	if st, err := other.Status(ctx, foreign); err != nil || st.State != runtime.StateRunning {
		t.Errorf("the other root's container %s: %+v, %v; want it left running", foreign, st, err)
	}
	if ids := runcIDs(t, filepath.Join(otherRoot, "runc")); len(ids) != 1 || ids[0] != foreign {
		t.Errorf("the other root's runc state: %v, want [%s]", ids, foreign)
	}
	if rep, err := Down(ctx, DownOptions{DataDir: dataDir}); err != nil || rep != (DownReport{}) {
		t.Errorf("a second Down: %s, %v; want nothing to clean up", rep, err)
	}
}
