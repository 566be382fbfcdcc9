package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestDRADriverKill9DuringPrepare kills the driver while it prepares a
// claim; once a driver is back the pod starts, and the claim was prepared
// exactly once.
func TestDRADriverKill9DuringPrepare(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "dra-drvkill", draModel, []string{"--prepare-delay", "3s"}, nil)
	d.applyYAML(t, namespace("k")+"---\n"+gpuParams("k", "one", `{count: 1}`)+"---\n"+claimTemplate("k", "one", "one")+"---\n"+
		draPod("k", "p", "  - {name: gpu, resourceClaimTemplateName: one}", "main"))
	claim := d.podClaim(t, "k", "p")
	waitFor(t, "claim reserved for the bound pod", func() bool {
		return d.jsonpath(t, "{.status.reservedFor[0].name}", "resourceclaim", claim, "-n", "k") == "p" &&
			d.jsonpath(t, "{.spec.nodeName}", "pod", "p", "-n", "k") == "dra-drvkill"
	})
	time.Sleep(time.Second) // the node agent admits the pod and calls prepare, which sleeps 3s
	d.driver.Kill()
	uid := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", claim, "-n", "k")
	if n := d.stateLines(t, "prepare", uid); n != 0 {
		t.Fatalf("claim prepared %d times before the kill, want 0 (prepare should still be sleeping)", n)
	}
	if got := d.phase(t, "k", "p"); got != "Pending" {
		t.Fatalf("pod is %s while its driver is down, want Pending", got)
	}
	d.driver = d.startDriver(t, "--prepare-delay", "0s")
	waitFor(t, "pod p Running after the driver came back", func() bool { return d.phase(t, "k", "p") == "Running" })
	if n := d.stateLines(t, "prepare", uid); n != 1 {
		t.Errorf("claim prepared %d times, want 1", n)
	}
}

// TestDRANodeAgentKill9 kills the node agent while a pod holds a prepared
// claim: the restarted agent neither prepares it again nor leaks it, and
// unprepares it once the pod is deleted.
func TestDRANodeAgentKill9(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "dra-agentkill", draModel, nil, nil)
	d.applyYAML(t, namespace("k")+"---\n"+gpuParams("k", "one", `{count: 1}`)+"---\n"+claimTemplate("k", "one", "one")+"---\n"+
		draPod("k", "p", "  - {name: gpu, resourceClaimTemplateName: one}", "main"))
	waitFor(t, "pod p Running", func() bool { return d.phase(t, "k", "p") == "Running" })
	claim := d.podClaim(t, "k", "p")
	uid := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", claim, "-n", "k")
	started := d.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "p", "-n", "k")

	d.node.Kill()
	d.restartNode(t)
	time.Sleep(2 * time.Second) // resyncs and relists of the new agent
	if got := d.phase(t, "k", "p"); got != "Running" {
		t.Fatalf("pod is %s after the agent restart, want Running", got)
	}
	if got := d.jsonpath(t, "{.status.containerStatuses[0].state.running.startedAt}", "pod", "p", "-n", "k"); got != started {
		t.Errorf("container restarted: startedAt %s, was %s", got, started)
	}
	if n := d.stateLines(t, "prepare", uid); n != 1 {
		t.Errorf("claim prepared %d times across the agent restart, want 1", n)
	}
	d.allot(t, "delete", "pod", "p", "-n", "k", "--timeout", "60s")
	waitFor(t, "claim unprepared after the pod went", func() bool { return d.stateLines(t, "unprepare", uid) == 1 })
	waitFor(t, "generated claim deleted", func() bool {
		_, _, err := d.runKubectl("get", "resourceclaim", claim, "-n", "k")
		return err != nil
	})
}

// TestDRAPrepareRetries: a driver whose prepare fails three times; the pod
// stays Pending with events meanwhile, then runs.
func TestDRAPrepareRetries(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "dra-retry", draModel, []string{"--fail-prepares", "3"}, nil)
	d.applyYAML(t, namespace("r")+"---\n"+gpuParams("r", "one", `{count: 1}`)+"---\n"+claimTemplate("r", "one", "one")+"---\n"+
		draPod("r", "p", "  - {name: gpu, resourceClaimTemplateName: one}", "main"))
	waitFor(t, "pod p Running after the failed prepares", func() bool { return d.phase(t, "r", "p") == "Running" })
	out := d.kubectl(t, "get", "events", "-n", "r", "--field-selector", "involvedObject.name=p")
	if !strings.Contains(strings.ToLower(out), "fail") {
		t.Errorf("no event of pod p tells of the failed prepares:\n%s", out)
	}
	uid := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", d.podClaim(t, "r", "p"), "-n", "r")
	if n := d.stateLines(t, "prepare", uid); n != 1 {
		t.Errorf("claim prepared %d times, want 1", n)
	}
}
