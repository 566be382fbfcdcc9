package node_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/runtime"
)

// TestStopContainersOnExit: an agent with StopContainersOnExit stops its
// running container when it exits and keeps its record; the next agent
// applies the pod's restart policy (Always: a new container, restart
// count 1), as after a reboot.
func TestStopContainersOnExit(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	root := t.TempDir()
	cfg := agentConfig(t, c, name, root)
	cfg.StopContainersOnExit = true
	cfg.ShutdownGracePeriod = 200 * time.Millisecond
	stop := startAgent(t, cfg)

	makePod(ns, "long", name).create(t, c)
	before := waitPod(t, c, ns, "long", "Running", running).Status.ContainerStatuses[0]
	stop()

	cs, err := newFakeRuntime(t, root).List(callContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].State != runtime.StateExited {
		t.Fatalf("after the agent exited, containers = %+v; want the one container, Exited", cs)
	}

	cfg = agentConfig(t, c, name, root)
	cfg.StopContainersOnExit = true
	startAgent(t, cfg)
	after := waitPod(t, c, ns, "long", "restarted", func(p *corev1.Pod) bool {
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].RestartCount == 1 && s[0].State.Running != nil
	}).Status.ContainerStatuses[0]
	if after.ContainerID == before.ContainerID {
		t.Fatalf("container %s was not replaced", after.ContainerID)
	}
	if err := c.Pods(ns).Delete(callContext(t), "long", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitPodGone(t, c, ns, "long")
}

// TestPodResourcesFallback: a second agent on a host whose PodResources
// socket another agent serves takes its fallback socket; the first keeps
// its own.
func TestPodResourcesFallback(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	dir, err := os.MkdirTemp("", "podres") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	shared, fallback := filepath.Join(dir, "shared.sock"), filepath.Join(dir, "fb", "kubelet.sock")
	for i, n := range []string{testName(t) + "-a", testName(t) + "-b"} {
		cfg := agentConfig(t, c, n, t.TempDir())
		cfg.PodResourcesSocket = shared
		if i == 1 {
			cfg.PodResourcesFallbackSocket = fallback
		}
		startAgent(t, cfg)
		waitNodeReady(t, c, n)
		eventually(t, 10*time.Second, "agent "+n+" serves PodResources", func() (bool, string) {
			sock := shared
			if i == 1 {
				sock = fallback
			}
			conn, err := net.DialTimeout("unix", sock, time.Second)
			if err != nil {
				return false, err.Error()
			}
			conn.Close()
			return true, ""
		})
	}
}
