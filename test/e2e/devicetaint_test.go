package e2e

import (
	"strings"
	"testing"
)

// TestDeviceTaintEviction: a NoExecute DeviceTaintRule, created through
// resource.k8s.io/v1alpha3 as drivers written for Kubernetes 1.35 do,
// evicts a running pod using the device it selects (DisruptionTarget
// DeletionByDeviceTaintManager, a DeviceTaintManagerEviction event); the
// pod's containers stop, the node unprepares its claim, and only then is
// the claim released. The rule's status counts the eviction, and the
// tainted device is not allocated again while the rule stands.
func TestDeviceTaintEviction(t *testing.T) {
	t.Parallel()
	u := newUpstreamCluster(t, "taint-node")
	waitFor(t, "the driver's slice", func() bool {
		return u.jsonpath(t, "{.items[*].spec.driver}", "resourceslices", "--field-selector", "spec.nodeName="+u.nodeName) == upstreamDriverName
	})
	u.applyYAML(t, namespace("up")+"---\n"+upstreamClasses)
	u.applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: victim, namespace: up}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: upstream-gpu}
---
`+upstreamPod("up", "victim", "  - {name: gpu, resourceClaimName: victim}", [2]string{"main", ""}))
	seen := devicesSeen(u.logLine(t, "up", "victim", "main"))
	if len(seen) != 1 {
		t.Fatalf("the pod sees %q, want one GPU", seen)
	}
	device := u.jsonpath(t, "{.status.allocation.devices.results[0].device}", "resourceclaim", "victim", "-n", "up")
	uid := u.jsonpath(t, "{.metadata.uid}", "resourceclaim", "victim", "-n", "up")
	if u.stateLines(t, "prepare", uid) != 1 {
		t.Fatalf("claim %s not prepared once", uid)
	}

	u.applyYAML(t, `apiVersion: resource.k8s.io/v1alpha3
kind: DeviceTaintRule
metadata: {name: broken-gpu}
spec:
  deviceSelector: {driver: `+upstreamDriverName+`, pool: `+u.nodeName+`, device: `+device+`}
  taint: {key: example.com/health, value: ecc, effect: NoExecute}
`)
	// The claim stays reserved until the node has unprepared it: when it
	// is first seen released, the driver's unprepare is already recorded.
	waitFor(t, "the claim released", func() bool {
		if u.jsonpath(t, "{.status.reservedFor}", "resourceclaim", "victim", "-n", "up") != "" {
			return false
		}
		if n := u.stateLines(t, "unprepare", uid); n != 1 {
			t.Fatalf("the claim was released with %d unprepares recorded, want 1 before the release", n)
		}
		return true
	})
	if out, _, err := u.runKubectl("get", "pod", "victim", "-n", "up"); err == nil && strings.Contains(out, "victim") {
		// Still terminating at most; its condition says why.
		if r := u.jsonpath(t, `{.status.conditions[?(@.type=="DisruptionTarget")].reason}`, "pod", "victim", "-n", "up"); r != "" && r != "DeletionByDeviceTaintManager" {
			t.Errorf("DisruptionTarget reason %q", r)
		}
	}
	events := u.kubectl(t, "get", "events", "-n", "up", "--field-selector", "involvedObject.name=victim", "-o", "jsonpath={.items[*].reason}")
	if !strings.Contains(events, "DeviceTaintManagerEviction") {
		t.Errorf("events of the pod: %s, want DeviceTaintManagerEviction", events)
	}
	waitFor(t, "the rule's status counts the eviction", func() bool {
		return u.jsonpath(t, `{.status.conditions[?(@.type=="EvictionInProgress")].message}`, "devicetaintrules.v1alpha3.resource.k8s.io", "broken-gpu") ==
			"1 pod evicted since starting the controller."
	})

	// A new pod gets another device, never the tainted one.
	u.applyYAML(t, upstreamPod("up", "next", "  - {name: gpu, resourceClaimTemplateName: one-gpu}", [2]string{"main", ""}))
	if next := devicesSeen(u.logLine(t, "up", "next", "main")); len(next) != 1 || next[0] == seen[0] {
		t.Errorf("the next pod sees %q, the tainted device was %q", next, seen)
	}
	u.kubectl(t, "delete", "devicetaintrules.v1alpha3.resource.k8s.io", "broken-gpu")
}
