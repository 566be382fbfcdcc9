package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot.dev/allot/internal/node/dra/dratest"
)

// TestUpDemo runs `allot up --demo` as the README does: the example device
// plugin, structured DRA driver and control-plane DRA driver run
// in-process, and the demo pod gets a device from each (a device-plugin
// resource, a structured claim shared by its two containers, a
// control-plane claim), prints what it received and succeeds.
func TestUpDemo(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	c := newCluster(t)
	c.start(t, "--demo", "--disable", "", "--demo-timeout", "3m",
		"--pod-resources-socket", filepath.Join(c.dataDir, "pod-resources.sock"),
		"--admit-retry-interval", "200ms", "--relist-interval", "200ms")
	t.Cleanup(func() {
		// The node removes the pod's containers (and their mounts) before
		// allot up stops.
		if _, stderr, err := c.runKubectl("delete", "pod", "demo", "-n", "demo", "--wait=true", "--timeout=90s"); err != nil {
			t.Logf("delete the demo pod: %v: %s", err, stderr)
		}
	})
	line, _, err := c.p.Stdout.WaitFor(0, 4*time.Minute, func(s string) bool { return strings.HasPrefix(s, "demo: pod demo/demo ") })
	if err != nil {
		t.Fatalf("no demo outcome: %v\nstdout:\n%s", err, c.p.Stdout)
	}
	if line != "demo: pod demo/demo Succeeded" {
		t.Fatalf("demo ended with %q\nstdout:\n%s", line, c.p.Stdout)
	}
	// A clean start and demo log nothing that looks like a problem.
	var noisy []string
	for _, l := range strings.Split(c.p.Stderr.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			noisy = append(noisy, l)
		}
	}
	if len(noisy) > 0 {
		t.Errorf("allot up --demo logged warnings or errors on a clean start:\n%s", strings.Join(noisy, "\n"))
	}
	out := c.p.Stdout.String()
	requireContains(t, "allot up --demo output", out,
		"demo: trainer| trainer: device plugin gave EXAMPLE_DEVICES=gpu-",
		"demo: trainer| trainer: DRA claim demo/demo-gpu-",
		"sharing TimeSlicing",
		"demo: monitor| monitor: shares claim demo/demo-gpu-",
		"demo: trainer| trainer: fabric claim: units rack-1-", "in pool rack-1")
	// Both containers name the same claim and instances.
	trainer := regexp.MustCompile(`DRA claim (\S+): instances (\S+),`).FindStringSubmatch(out)
	monitor := regexp.MustCompile(`shares claim (\S+), instances (\S+)`).FindStringSubmatch(out)
	if trainer == nil || monitor == nil || trainer[1] != monitor[1] || trainer[2] != monitor[2] {
		t.Errorf("containers disagree on the claim: trainer %q, monitor %q", trainer, monitor)
	}
	requireLines(t, "slice drivers", c.kubectl(t, "get", "noderesourceslices", "-o", "jsonpath={.items[*].spec.driverName}"), "fabric.example.com gpu.example.com")

	deleteWithoutDriver(t, c)
}

// deleteWithoutDriver: a pod holding a claim of gpu.example.com runs; the
// cluster restarts without --demo, so without the driver, as the user
// guide's restart does. Deleting the pod then waits for the driver: the
// wait's timeout, describe, explain and an event say so and how to force
// it, and --force removes the pod.
func deleteWithoutDriver(t *testing.T, c *cluster) {
	c.allot(t, "apply", "-f", filepath.Join(repoRoot(t), "examples/gpu-driver/deploy/example/gpu-pair.yaml"))
	waitFor(t, "gpu-pair Running", func() bool { return c.jsonpath(t, "{.status.phase}", "pod", "gpu-pair") == "Running" })
	claim := c.jsonpath(t, "{.status.resourceClaimStatuses[0].resourceClaimName}", "pod", "gpu-pair")
	c.stop(t)
	dir := dratest.ShortTempDir(t) // unix socket paths are short
	c.start(t, "--disable", "", "--device-plugin-dir", filepath.Join(dir, "dp"), "--plugins-registry-dir", filepath.Join(dir, "reg"),
		"--pod-resources-socket", filepath.Join(dir, "pr.sock"), "--relist-interval", "200ms",
		"--dra-prepare-backoff-initial", "200ms", "--dra-prepare-backoff-max", "1s")

	out := c.allotExpectFail(t, "delete", "pod", "gpu-pair", "--timeout", "3s")
	want := "waiting for DRA driver gpu.example.com to unprepare claim default/" + claim
	requireContains(t, "allot delete without the driver", out, "timed out waiting", want, "--force")
	requireContains(t, "allot describe pod", c.allot(t, "describe", "pod", "gpu-pair"), "Terminating since", "Deletion Waits:", "WaitingForDRADriver", want)
	requireContains(t, "allot explain pod", c.allot(t, "explain", "pod", "gpu-pair"), "Terminating since", "Its deletion waits", want, "--force")
	requireContains(t, "events", c.kubectl(t, "get", "events", "--field-selector", "involvedObject.name=gpu-pair"), "WaitingForDRADriver")

	c.allot(t, "delete", "pod", "gpu-pair", "--force", "--timeout", "30s")
	if _, _, err := c.runKubectl("get", "pod", "gpu-pair"); err == nil {
		t.Fatal("gpu-pair still exists after delete --force")
	}
}
