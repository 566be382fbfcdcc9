package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/storage/storagetest"
)

// TestFullDiskReadOnly runs `allot up` (all components, runc) with its
// data dir on a small tmpfs and fills the disk with another file: writes
// are answered 507 naming the condition, reads served, the process stays
// up, the node agent goes on restarting a crashing container (its
// restart policy) and logs the condition once; once the file is gone
// writes work, the status catches up, and what was stored is all there.
// Before the disk guard, etcd's ENOSPC ended the whole process.
func TestFullDiskReadOnly(t *testing.T) {
	requireRoot(t)
	tmp := storagetest.Tmpfs(t, 320)
	c := newCluster(t)
	c.dataDir = filepath.Join(tmp, "cluster")
	dir := dratest.ShortTempDir(t) // unix socket paths are short
	c.start(t, "--disable", "", "--etcd-disk-reserve", "40Mi",
		"--device-plugin-dir", filepath.Join(dir, "dp"), "--plugins-registry-dir", filepath.Join(dir, "reg"),
		"--pod-resources-socket", filepath.Join(dir, "pr.sock"))
	t.Cleanup(func() { c.deleteAllPods(t) })
	c.applyYAML(t, `apiVersion: v1
kind: Pod
metadata: {name: flappy}
spec:
  restartPolicy: Always
  containers: [{name: c, image: busybox, command: ["sh", "-c", "echo started; sleep 1; exit 1"]}]
`)
	logs := filepath.Join(c.dataDir, "node", "pods", "default_flappy_*", "c", "*.log")
	runs := func() int {
		m, _ := filepath.Glob(logs)
		return len(m)
	}
	waitFor(t, "flappy's first run", func() bool { return runs() >= 1 })

	release := storagetest.FillDisk(t, tmp, 20<<20)
	out := c.kubectlExpectFail(t, "create", "namespace", "refused")
	requireContains(t, "a write on a full disk", out, "etcd cannot write: no space left on device", "below the 40.0 MiB allot keeps free", "reads are still served")
	requireContains(t, "a read on a full disk", c.kubectl(t, "get", "pods"), "flappy")
	reported := c.jsonpath(t, "{.status.containerStatuses[0].restartCount}", "pod", "flappy")
	// The node agent still restarts the container while the API is
	// read-only: a new run's log file appears (crash-loop back-off 10 s,
	// then 20 s: within waitFor's minute).
	before := runs()
	waitFor(t, "flappy restarted on a full disk", func() bool { return runs() > before })
	waitFor(t, "the node agent's log of the condition", func() bool {
		return strings.Contains(c.p.Stderr.String(), `msg="the API server refuses writes: its storage has no space; retrying with back-off until it takes them again (reads still work)" component=node`)
	})
	if c.p.Exited() {
		t.Fatalf("allot up exited on a full disk: %v", c.p.Err())
	}

	release()
	c.kubectl(t, "create", "namespace", "after")
	waitFor(t, "flappy's restarts reported", func() bool {
		n := c.jsonpath(t, "{.status.containerStatuses[0].restartCount}", "pod", "flappy")
		return len(n) > len(reported) || len(n) == len(reported) && n > reported
	})
	waitFor(t, "the node agent's log of the recovery", func() bool {
		return strings.Contains(c.p.Stderr.String(), `msg="the API server takes writes again" component=node`)
	})
	stderr := c.p.Stderr.String()
	if n := strings.Count(stderr, "the API server refuses writes"); n > 4 {
		t.Errorf("the refusal was logged %d times (once per component that wrote, at most)", n)
	}
	if strings.Contains(stderr, `msg=heartbeat`) || strings.Contains(stderr, `msg="update pod status"`) {
		t.Errorf("retries of refused writes logged above debug level:\n%s", tail(stderr, 4000))
	}
}
