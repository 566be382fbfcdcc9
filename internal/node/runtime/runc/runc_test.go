package runc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	rt "allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/images"
)

func TestRunEnvMountAndLog(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := spec(t, "env", "sh", "-c", `echo $FOO; cat /data/hello; echo "$(hostname) $(pwd)" >&2`)
	cs.Env = []string{"FOO=bar baz"}
	cs.WorkingDir = "/tmp"
	cs.Mounts = []rt.Mount{{HostPath: data, ContainerPath: "/data", ReadOnly: true}}
	id := run(t, r, cs)
	st := waitExited(t, r, id)
	if st.ExitCode != 0 || st.Reason != "Completed" || st.Signal != 0 {
		t.Fatalf("status = %+v, want exit 0 Completed", st)
	}
	if st.StartedAt.IsZero() || st.FinishedAt.Before(st.StartedAt) || st.PodUID != "uid-env" || st.Name != "env" {
		t.Fatalf("status = %+v", st)
	}
	wantLog(t, cs, "bar baz", "hello from the host", "pod-env /tmp")
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	tests := map[string]struct {
		cmd        string
		code, sig  int32
		wantReason string
	}{
		"success": {cmd: "exit 0", code: 0, wantReason: "Completed"},
		"failure": {cmd: "exit 3", code: 3, wantReason: "Error"},
		// An exit code above 128 is not a signal (SIGKILL is tested by Stop).
		"high code": {cmd: "exit 137", code: 137, wantReason: "Error"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id := run(t, r, spec(t, name, "sh", "-c", tc.cmd))
			st := waitExited(t, r, id)
			if st.ExitCode != tc.code || st.Signal != tc.sig || st.Reason != tc.wantReason {
				t.Fatalf("status = %+v, want code %d signal %d reason %s", st, tc.code, tc.sig, tc.wantReason)
			}
		})
	}
}

func TestStopGrace(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	tests := map[string]struct {
		cmd      string
		code     int32
		min, max time.Duration
	}{
		// As PID 1, sleep ignores SIGTERM: killed after the grace period.
		"ignores TERM": {cmd: "exec sleep 1000", code: 137, min: time.Second, max: 8 * time.Second},
		"handles TERM": {cmd: `trap "exit 0" TERM; while true; do sleep 0.1; done`, code: 0, max: 900 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id := run(t, r, spec(t, strings.ReplaceAll(name, " ", "-"), "sh", "-c", tc.cmd))
			time.Sleep(300 * time.Millisecond) // let the trap be installed
			begin := time.Now()
			if err := r.Stop(ctxT(t), id, time.Second); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			took := time.Since(begin)
			st, err := r.Status(ctxT(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != rt.StateExited || st.ExitCode != tc.code {
				t.Fatalf("after Stop status = %+v, want Exited with %d", st, tc.code)
			}
			if took < tc.min || took > tc.max {
				t.Fatalf("Stop took %s, want between %s and %s", took, tc.min, tc.max)
			}
			if err := r.Stop(ctxT(t), id, time.Second); err != nil {
				t.Fatalf("second Stop: %v", err)
			}
		})
	}
}

func TestStartErrorAndUnknownImage(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	ctx := ctxT(t)
	cs := spec(t, "missing", "/no/such/binary")
	id, err := r.Create(ctx, cs)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := r.Start(ctx, id); err == nil || !strings.Contains(err.Error(), "/no/such/binary") {
		t.Fatalf("Start error = %v, want one naming the binary", err)
	}
	st, err := r.Status(ctx, id)
	if err != nil || st.State != rt.StateExited || st.Reason != "StartError" || st.ExitCode != 128 {
		t.Fatalf("status = %+v, %v; want Exited StartError", st, err)
	}
	bad := spec(t, "bad", "true")
	bad.Image = "acme.example/nothing:v9"
	if _, err := r.Create(ctx, bad); !errors.Is(err, images.ErrNotFound) || !strings.Contains(err.Error(), "acme.example/nothing:v9") {
		t.Fatalf("Create with unknown image: %v", err)
	}
	if _, err := r.Status(ctx, "nope"); !errors.Is(err, rt.ErrNotFound) {
		t.Fatalf("Status of unknown id: %v", err)
	}
}

func TestDevicePluginDevicesAndAnnotations(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	cs := spec(t, "dev", "sh", "-c", "head -c 3 /dev/mygpu0 | wc -c; stat -c '%t:%T' /dev/mygpu0; echo x > /dev/mygpu0 && echo wrote")
	cs.Devices = []rt.Device{{HostPath: "/dev/zero", ContainerPath: "/dev/mygpu0", Permissions: "rw"}}
	cs.Annotations = map[string]string{"vendor.example/dev": "gpu0"}
	id := run(t, r, cs)
	if st := waitExited(t, r, id); st.ExitCode != 0 {
		t.Fatalf("status = %+v\nlog:\n%s", st, readLog(t, cs))
	}
	wantLog(t, cs, "3", "1:5", "wrote")
	config, err := os.ReadFile(filepath.Join(r.dir, id, configFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"vendor.example/dev": "gpu0"`, `"allot.dev/pod-uid": "uid-dev"`} {
		if !strings.Contains(string(config), s) {
			t.Errorf("config.json lacks %s", s)
		}
	}
	bad := spec(t, "notdev", "true")
	bad.Devices = []rt.Device{{HostPath: "/etc/hostname", ContainerPath: "/dev/x"}}
	if _, err := r.Create(ctxT(t), bad); !errors.Is(err, errNotDevice) {
		t.Fatalf("Create with a non-device: %v", err)
	}
}

func TestRootfsIsolation(t *testing.T) {
	t.Parallel()
	for _, overlay := range []bool{true, false} {
		name := map[bool]string{true: "overlay", false: "readonly"}[overlay]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newTestRuntime(t, "", func(o *Options) { o.DisableOverlay = !overlay })
			cs := spec(t, name, "sh", "-c", "echo tmp > /tmp/f && cat /tmp/f; touch /bin/new && echo wrote-bin; true")
			id := run(t, r, cs)
			if st := waitExited(t, r, id); st.ExitCode != 0 {
				t.Fatalf("status = %+v", st)
			}
			wantLog(t, cs, "tmp")
			if got := strings.Contains(readLog(t, cs), "wrote-bin"); got != overlay {
				t.Errorf("write to /bin succeeded = %v, want %v", got, overlay)
			}
			img, err := r.images.Get(ctxT(t), "busybox")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"bin/new", "tmp/f"} {
				if _, err := os.Lstat(filepath.Join(img.Rootfs, p)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("container wrote %s into the shared image: %v", p, err)
				}
			}
		})
	}
}

func TestImportedImageWithTag(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	bb, err := r.images.Get(ctxT(t), "busybox")
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	if out, err := exec.Command("tar", "-C", bb.Rootfs, "-cf", tarPath, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	cfg := images.Config{Entrypoint: []string{"sh", "-c"}, Cmd: []string{"echo default"}, Env: []string{"IMG=1"}, WorkingDir: "/etc"}
	if _, err := r.images.Import(ctxT(t), "example.com/tools/shell:v1,2", tarPath, cfg, false); err == nil {
		t.Fatal("Import accepted a comma in the tag")
	}
	if _, err := r.images.Import(ctxT(t), "example.com/tools/shell:v1", tarPath, cfg, false); err != nil {
		t.Fatalf("Import: %v", err)
	}
	cs := spec(t, "imported")
	cs.Image = "example.com/tools/shell:v1"
	cs.Args = []string{`echo "$IMG $(pwd)"`}
	id := run(t, r, cs)
	if st := waitExited(t, r, id); st.ExitCode != 0 {
		t.Fatalf("status = %+v log %s", st, readLog(t, cs))
	}
	wantLog(t, cs, "1 /etc")
}

func TestRuntimeVersion(t *testing.T) {
	r := newTestRuntime(t, "")
	if v := r.RuntimeVersion(ctxT(t)); !strings.HasPrefix(v, "runc://1.") {
		t.Fatalf("RuntimeVersion = %q", v)
	}
	if r.Name() != "runc" || !r.SupportsCDI() {
		t.Fatal("Name or SupportsCDI wrong")
	}
}

// TestAdoption: a new Runtime over the same root (a restarted agent) lists
// a running container with its identity and original start time.
func TestAdoption(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	first := newTestRuntime(t, root)
	cs := spec(t, "adopt", "sleep", "1000")
	cs.Attempt = 2
	id := run(t, first, cs)
	before, err := first.Status(ctxT(t), id)
	if err != nil || before.State != rt.StateRunning || before.PID == 0 {
		t.Fatalf("status = %+v, %v", before, err)
	}
	first = nil //nolint:ineffassign // drop the creating runtime: the shim must not care

	second := newTestRuntime(t, root)
	list, err := second.List(ctxT(t))
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	got := list[0]
	if got.ID != id || got.State != rt.StateRunning || got.PodUID != "uid-adopt" || got.PodNamespace != "default" ||
		got.PodName != "pod-adopt" || got.Name != "adopt" || got.Attempt != 2 ||
		!got.StartedAt.Equal(before.StartedAt) || got.PID != before.PID {
		t.Fatalf("adopted status = %+v, want %+v", got, before)
	}
	if err := syscall.Kill(got.PID, 0); err != nil {
		t.Fatalf("container process %d: %v", got.PID, err)
	}
	if err := second.Stop(ctxT(t), id, 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st := waitExited(t, second, id); st.Signal != 9 {
		t.Fatalf("status = %+v, want killed", st)
	}
}

// TestSurvivesAgentKill: an agent process creates and starts a container
// and is killed with SIGKILL; the container keeps running, and its exit
// code, produced later, is still recorded for the next agent.
func TestSurvivesAgentKill(t *testing.T) {
	t.Parallel()
	requireRunc(t)
	root := t.TempDir()
	agent := exec.Command(os.Args[0])
	agent.Env = append(os.Environ(), agentEnv+"="+root, agentEnv+"_CMD=sleep 2; echo done; exit 7")
	agent.Stderr = os.Stderr
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = agent.Process.Kill()
		t.Fatalf("agent: %v", err)
	}
	if err := agent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait()
	agentDied := time.Now()
	id := strings.TrimSpace(line)

	r := newTestRuntime(t, root)
	st, err := r.Status(ctxT(t), id)
	if err != nil || st.State != rt.StateRunning {
		t.Fatalf("after the agent's death: %+v, %v", st, err)
	}
	st = waitExited(t, r, id)
	// The exit happened after the agent died, so only the shim can have
	// recorded it.
	if st.ExitCode != 7 || st.Reason != "Error" || !st.FinishedAt.After(agentDied) {
		t.Fatalf("status = %+v, want exit 7 recorded after the agent died at %s", st, agentDied)
	}
	data, err := os.ReadFile(filepath.Join(root, "agent.log"))
	if err != nil || string(data) != "done\n" {
		t.Fatalf("log = %q, %v", data, err)
	}
}

// TestListDuringStart: the agent relists while pod workers start
// containers; probing shims must not disturb starting ones.
func TestListDuringStart(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.List(ctxT(t)); err != nil {
				t.Errorf("List: %v", err)
				return
			}
		}
	}()
	for i := range 4 {
		id := run(t, r, spec(t, fmt.Sprintf("busy%d", i), "true"))
		if st := waitExited(t, r, id); st.ExitCode != 0 {
			t.Errorf("status = %+v", st)
		}
	}
	close(stop)
	<-done
}

// TestShimProbe: a shim command that does not reach ShimMain (a binary
// without the hidden command) fails New, not every Start.
func TestShimProbe(t *testing.T) {
	requireRunc(t)
	_, err := New(Options{RootDir: t.TempDir(), ShimCommand: []string{"/bin/sh", "-c", "echo unknown command; exit 1"}})
	if err == nil || !strings.Contains(err.Error(), "does not run the shim") {
		t.Fatalf("New with a bad shim command: %v", err)
	}
	t.Setenv(shimEnv, "1")
	if _, err := New(Options{RootDir: t.TempDir()}); err == nil {
		t.Fatal("New inside a shim succeeded")
	}
}

// TestReleaseWaitsForExitingShim: right after Stop returns (the exit is
// recorded) the shim may still hold its lock for an instant; Release waits
// for it to end instead of failing with "still running", which made allot
// down fail now and then. The test holds the shim lock itself, after the
// real shim ended, and lets go once Release waits.
func TestReleaseWaitsForExitingShim(t *testing.T) {
	r := newTestRuntime(t, "")
	id := run(t, r, spec(t, "exiting", "true"))
	waitExited(t, r, id)
	b, err := r.bundle(id)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(b.path(shimLock), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := ctxT(t)
	for { // the real shim may still end; then the lock is ours
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the shim never ended")
		case <-time.After(10 * time.Millisecond):
		}
	}
	waited := false
	shimWaitHook = func() { waited = true; _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }
	t.Cleanup(func() { shimWaitHook = nil })
	if err := r.Release(ctx, id); err != nil {
		t.Fatalf("Release while the exited container's shim ends: %v", err)
	}
	if !waited {
		t.Fatal("Release did not wait for the shim")
	}
}
