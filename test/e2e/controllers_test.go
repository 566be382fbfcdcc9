package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestControllersInAllotUp: the controller manager that `allot up` runs
// marks agent-less nodes NotReady, collects dependents of deleted owners
// and completes namespace deletion.
func TestControllersInAllotUp(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t, "--node-monitor-grace-period", "1s", "--node-monitor-period", "200ms")

	now := time.Now().UTC().Format(time.RFC3339)
	c.applyYAML(t, `apiVersion: v1
kind: Node
metadata: {name: quiet-node}
status:
  conditions:
  - {type: Ready, status: "True", lastHeartbeatTime: "`+now+`"}
`)
	waitFor(t, "quiet-node marked NotReady", func() bool {
		return strings.Contains(c.kubectl(t, "get", "node", "quiet-node"), "NotReady")
	})

	c.kubectl(t, "create", "namespace", "gc-test")
	c.kubectl(t, "run", "owner", "-n", "gc-test", "--image", "busybox", "--restart", "Never")
	uid := c.kubectl(t, "get", "pod", "owner", "-n", "gc-test", "-o", "jsonpath={.metadata.uid}")
	c.applyYAML(t, `apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata:
  name: owned
  namespace: gc-test
  ownerReferences: [{apiVersion: v1, kind: Pod, name: owner, uid: `+uid+`}]
spec: {resourceClassName: gpu}
`)
	c.kubectl(t, "delete", "pod", "owner", "-n", "gc-test")
	waitFor(t, "owned claim collected", func() bool {
		_, stderr, err := c.runKubectl("get", "resourceclaim", "owned", "-n", "gc-test")
		return err != nil && strings.Contains(stderr, "NotFound")
	})

	c.kubectl(t, "create", "namespace", "doomed")
	c.kubectl(t, "run", "inside", "-n", "doomed", "--image", "busybox", "--restart", "Never")
	c.allot(t, "delete", "namespace", "doomed", "--timeout", "60s")
	if _, stderr, err := c.runKubectl("get", "namespace", "doomed"); err == nil || !strings.Contains(stderr, "NotFound") {
		t.Fatalf("namespace doomed still exists: %s", stderr)
	}
}

// applyYAML applies a manifest given inline.
func (c *cluster) applyYAML(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubectl(t, "apply", "-f", f)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
