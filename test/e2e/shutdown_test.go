package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpCtrlCAndDown: Ctrl-C on allot up stops what it started (the pod's
// container and shim, the rootfs mount), and the next start runs the pod
// again per its restart policy; with --keep-containers the container
// survives and is adopted; after a kill -9, allot down stops and cleans
// everything the data dir's cluster left.
func TestUpCtrlCAndDown(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	c := newCluster(t)
	args := []string{"--disable", "", "--node-name", "ctrlc", "--plugins-registry-dir", "",
		"--device-plugin-dir", filepath.Join(c.dataDir, "dp"), "--pod-resources-socket", filepath.Join(c.dataDir, "podres.sock"),
		"--heartbeat-interval", "500ms", "--relist-interval", "200ms", "--shutdown-grace-period", "300ms",
		"--restart-backoff-initial", "100ms", "--restart-backoff-max", "200ms"}
	t.Cleanup(func() { // whatever happened, leave nothing running
		if c.p != nil {
			_, _ = c.p.Terminate(stopGrace)
		}
		_, _, _ = c.run(allotBin, "down", "--data-dir", c.dataDir, "--grace-period", "100ms")
	})
	c.start(t, args...)
	c.applyYAML(t, `apiVersion: v1
kind: Pod
metadata: {name: long}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox, command: ["sleep", "1000"]}]
`)
	first := c.waitRunning(t, "long", "0")
	if !c.leftovers(t).running() {
		t.Fatalf("while the pod runs: no shim or mount found under the data dir; the checks below could not fail: %+v", c.leftovers(t))
	}

	// Ctrl-C: allot up exits by itself and leaves nothing behind.
	c.p.SignalGroup(syscall.SIGINT)
	select {
	case <-c.p.Done():
	case <-time.After(stopGrace):
		t.Fatalf("allot up still running %v after SIGINT", stopGrace)
	}
	if l := c.leftovers(t); l.running() {
		t.Fatalf("after Ctrl-C: %+v", l)
	}
	if alive(first.pid) {
		t.Fatalf("after Ctrl-C: the container's process %d still runs", first.pid)
	}

	// The next start runs the pod again (restartPolicy Always).
	c.start(t, args...)
	second := c.waitRunning(t, "long", "1")
	if second.id == first.id {
		t.Fatalf("the pod's container was not replaced after Ctrl-C: %s", second.id)
	}

	// kill -9: the container outlives allot up; allot down stops it.
	c.p.Kill()
	if !alive(second.pid) {
		t.Fatalf("after kill -9 of allot up: the container %d died with it (it should outlive it)", second.pid)
	}
	if len(c.leftovers(t).sockets) == 0 {
		t.Fatal("after kill -9: no socket left under the data dir; the check below could not fail")
	}
	out := c.allotOffline(t, "down", "--data-dir", c.dataDir, "--grace-period", "100ms")
	requireContains(t, "allot down", out, "stopped 1 container,", "unmounted 1 container filesystem and")
	if l := c.leftovers(t); l.running() || len(l.sockets) > 0 {
		t.Fatalf("after allot down: %+v", l)
	}
	if alive(second.pid) {
		t.Fatalf("after allot down: the container's process %d still runs", second.pid)
	}
	if out := c.allotOffline(t, "down", "--data-dir", c.dataDir); !strings.Contains(out, "nothing to clean up") {
		t.Fatalf("a second allot down: %q, want nothing to clean up", out)
	}

	// --keep-containers: the container survives Ctrl-C and is adopted.
	keep := append([]string{"--keep-containers"}, args...)
	c.start(t, keep...)
	third := c.waitRunning(t, "long", "2")
	c.p.SignalGroup(syscall.SIGINT)
	<-c.p.Done()
	if !alive(third.pid) || !c.leftovers(t).running() {
		t.Fatalf("with --keep-containers the container %d did not survive Ctrl-C", third.pid)
	}
	c.start(t, args...)
	time.Sleep(time.Second) // relists and syncs of the new agent
	if again := c.waitRunning(t, "long", "2"); again.id != third.id {
		t.Fatalf("kept container not adopted: %s, was %s", again.id, third.id)
	}
	c.allot(t, "delete", "pod", "long", "--timeout", "60s")
}

// runningContainer is a pod's running container as its status says, with
// the PID runc recorded.
type runningContainer struct {
	id  string
	pid int
}

// waitRunning waits until the pod's container runs with the given restart
// count and returns it.
func (c *cluster) waitRunning(t *testing.T, pod, restarts string) runningContainer {
	t.Helper()
	waitFor(t, pod+" Running with restartCount "+restarts, func() bool {
		return c.jsonpath(t, "{.status.phase}/{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].ready}", "pod", pod) ==
			"Running/"+restarts+"/true"
	})
	id := strings.TrimPrefix(c.jsonpath(t, "{.status.containerStatuses[0].containerID}", "pod", pod), "runc://")
	data, err := os.ReadFile(filepath.Join(c.dataDir, "node", "containers", id, "init.pid"))
	if err != nil {
		t.Fatalf("container %s: %v", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("container %s: init.pid %q", id, data)
	}
	return runningContainer{id: id, pid: pid}
}

// allotOffline runs the allot CLI without a cluster and returns its stdout.
func (c *cluster) allotOffline(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.run(allotBin, args...)
	if err != nil {
		t.Fatalf("allot %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// leftovers is what runs or stays mounted on behalf of a data dir.
type leftovers struct {
	procs   []string // command lines naming the data dir (shims)
	mounts  []string // mount points under it
	sockets []string // unix sockets under it
}

func (l leftovers) running() bool { return len(l.procs) > 0 || len(l.mounts) > 0 }

func (c *cluster) leftovers(t *testing.T) leftovers {
	t.Helper()
	var l leftovers
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || (c.p != nil && !c.p.Exited() && pid == c.p.PID()) {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if s := strings.ReplaceAll(string(cmd), "\x00", " "); strings.Contains(s, c.dataDir+"/") {
			l.procs = append(l.procs, e.Name()+": "+s)
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], c.dataDir+"/") {
			l.mounts = append(l.mounts, fields[4])
		}
	}
	_ = filepath.WalkDir(c.dataDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeSocket != 0 {
			l.sockets = append(l.sockets, path)
		}
		return nil
	})
	return l
}

// alive reports whether a process runs (a zombie counts as gone).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
