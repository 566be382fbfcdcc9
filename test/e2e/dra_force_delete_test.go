package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// oneGPUModel is one whole GPU.
const oneGPUModel = `partitionable:
  resourceInstances:
  - name: gpu-0
    attributes:
    - {name: memory, quantity: 16Gi}
`

// stubbornPod is a pod whose container ignores SIGTERM, so that it runs
// for its whole grace period after a deletion.
func stubbornPod(ns, name, template string, grace int) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  terminationGracePeriodSeconds: ` + strconv.Itoa(grace) + `
  restartPolicy: Never
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: ` + template + `}
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap '' TERM; echo main sees $GPU_DEVICE_IDS $GPU_CLAIM; while true; do sleep 1; done"]
    resources: {claims: [{name: gpu}]}
`
}

// TestDRAForceDeleteWaitsForUnprepare: a pod force deleted while its
// container ignores SIGTERM keeps its device until the node has stopped
// the container and the driver unprepared the claim; only then does the
// pod waiting for the one GPU get it. The driver's own record shows the
// first claim unprepared before the second is prepared, and the claim's
// description says what its release waited for.
func TestDRAForceDeleteWaitsForUnprepare(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "dra-force", oneGPUModel, nil, nil)
	d.applyYAML(t, namespace("fd")+"---\n"+gpuParams("fd", "whole", `{count: 1, minimumMemory: 16Gi}`)+"---\n"+
		claimTemplate("fd", "whole", "whole")+"---\n"+stubbornPod("fd", "first", "whole", 4))
	waitFor(t, "pod first Running", func() bool { return d.phase(t, "fd", "first") == "Running" })
	if line := d.logLine(t, "fd", "first", "main"); !strings.Contains(line, "gpu-0") {
		t.Fatalf("pod first: %q, want gpu-0", line)
	}
	firstClaim := d.podClaim(t, "fd", "first")
	firstUID := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", firstClaim, "-n", "fd")
	d.applyYAML(t, draPod("fd", "second", "  - {name: gpu, resourceClaimTemplateName: whole}", "main"))
	waitFor(t, "pod second unschedulable", func() bool {
		return d.jsonpath(t, "{.status.conditions[?(@.type==\"PodScheduled\")].reason}", "pod", "second", "-n", "fd") == "Unschedulable"
	})

	d.allot(t, "delete", "pod", "first", "-n", "fd", "--force")
	// The container ignores SIGTERM for its 4s grace period: meanwhile
	// the claim waits for the node, and says so.
	waitFor(t, "the first claim's description names the wait", func() bool {
		out, _, err := d.run(allotBin, "describe", "resourceclaim", firstClaim, "-n", "fd")
		return err == nil && strings.Contains(out, "ReleaseWaitsForNode") && strings.Contains(out, "dra-force")
	})
	waitFor(t, "pod second Running", func() bool { return d.phase(t, "fd", "second") == "Running" })
	if line := d.logLine(t, "fd", "second", "main"); !strings.Contains(line, "gpu-0") {
		t.Fatalf("pod second: %q, want gpu-0", line)
	}
	secondUID := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", d.podClaim(t, "fd", "second"), "-n", "fd")
	data, err := os.ReadFile(d.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	unprepFirst := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "unprepare "+firstUID+" ") })
	prepSecond := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "prepare "+secondUID+" ") })
	if unprepFirst < 0 || prepSecond < 0 || prepSecond < unprepFirst {
		t.Fatalf("driver state:\n%s\nwant the first claim (%s) unprepared before the second (%s) is prepared", data, firstUID, secondUID)
	}
}
