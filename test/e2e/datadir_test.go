package e2e

import (
	"strings"
	"testing"
	"time"
)

// inUseTimeout is how long a second `allot up` on a busy data dir may take
// to give up.
const inUseTimeout = 30 * time.Second

// TestUpDataDirInUse starts a second `allot up` on the data dir of a running
// one, as a user who forgot the first would. It must fail with an error that
// names the data dir, and leave the running cluster alone.
func TestUpDataDirInUse(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t)

	args := []string{"up", "--data-dir", c.dataDir, "--listen", "127.0.0.1:0"}
	second, err := startProc("second allot up", childEnv(c.home), allotBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = second.Terminate(stopGrace) })

	select {
	case <-second.Done():
		if second.Err() == nil {
			t.Errorf("allot %s on a data dir in use exited 0, want an error\nstdout:\n%s", strings.Join(args, " "), second.Stdout)
		}
		requireContains(t, "second allot up on a data dir in use: stderr", second.Stderr.String(), c.dataDir)
	case <-time.After(inUseTimeout):
		t.Errorf("allot %s on a data dir in use (pid %d) is still running after %v; want it to fail fast with an error "+
			"naming the data dir (it waits for etcd's bbolt file lock without a timeout: storage.StartEmbedded -> "+
			"embed.StartEtcd, internal/storage/embedded.go)\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), second.PID(), inUseTimeout, second.Stdout, tail(second.Stderr.String(), 4000))
		if graceful, _ := second.Terminate(10 * time.Second); !graceful {
			t.Errorf("the blocked second allot up ignored SIGTERM for 10s (needed SIGKILL): the context is not " +
				"observed while it waits for the data dir")
		}
	}
	if strings.Contains(second.Stdout.String(), "kubeconfig: ") {
		t.Errorf("second allot up on a data dir in use printed a kubeconfig:\n%s", second.Stdout)
	}

	// The first cluster still serves, and its kubeconfig still points at it.
	c.kubectl(t, "get", "namespaces")
	requireDataDir(t, c, true)
}
