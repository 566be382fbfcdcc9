package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Control-plane DRA (seed 003) end to end, with the example driver
// fabric.example.com: allot up (scheduler, controller manager), fake-runtime
// nodes in racks, a kubelet plugin per node and the driver's controller as
// their own processes, and the pools of testdata/fabric-pools.yaml (rack-1:
// one unit reachable from rack r1; rack-2: two units, rack r2).

// TestFabricAllocation: an Immediate claim is allocated before any pod
// exists and its pod lands only in the pool's rack; a WaitForFirstConsumer
// claim goes through the PodSchedulingContext exchange and its pod runs;
// two pods race for the last unit of a pool: one runs, the other waits and
// runs once the first is deleted.
func TestFabricAllocation(t *testing.T) {
	t.Parallel()
	f := newFabricCluster(t, nil, "r1-a", "r2-a")
	// r1-a has more room: the scheduler's spreading alone would prefer it.
	f.addNode(t, "r1-a", "r1", "cpu=8")
	f.addNode(t, "r2-a", "r2", "cpu=2")
	f.startController(t)
	f.applyYAML(t, fabricParams("one", 1)+"---\n"+fabricTemplate("one", "one"))

	t.Run("Immediate claim", func(t *testing.T) {
		if pods := f.kubectl(t, "get", "pods", "-o", "name"); pods != "" {
			t.Fatalf("pods exist before the Immediate claim: %s", pods)
		}
		f.applyYAML(t, fabricClaim("imm", "one", "Immediate"))
		waitFor(t, "Immediate claim imm allocated", func() bool { _, ok := f.handle(t, "imm"); return ok })
		unit := f.requireOneUnit(t, "imm", "rack-2") // the pool with the most free units
		if pods := f.kubectl(t, "get", "pods", "-o", "name"); pods != "" {
			t.Fatalf("pods exist while the Immediate claim was allocated: %s", pods)
		}
		if got := f.jsonpath(t, "{.status.allocation.availableOnNodes.nodeSelectorTerms[0].matchExpressions[0].key}", v1alpha2Claims, "imm"); got != rackLabel {
			t.Errorf("claim imm availableOnNodes selects on %q, want %s", got, rackLabel)
		}

		f.applyYAML(t, fabricPod("imm-user", "resourceClaimName: imm"))
		waitFor(t, "imm-user Running", func() bool { return f.phase(t, "imm-user") == "Running" })
		if node := f.podNode(t, "imm-user"); node != "r2-a" {
			t.Fatalf("imm-user runs on %s, want r2-a, the only node in rack r2 of the claim's pool", node)
		}
		if got := f.jsonpath(t, "{.status.reservedFor[*].name}", v1alpha2Claims, "imm"); got != "imm-user" {
			t.Errorf("claim imm reserved for %q, want imm-user", got)
		}
		f.waitAttached(t, "r2-a", "imm", unit)

		f.allot(t, "delete", "pod", "imm-user", "--timeout", "60s")
		waitFor(t, "claim imm unreserved and detached", func() bool {
			return f.jsonpath(t, "{.status.reservedFor}", v1alpha2Claims, "imm") == "" &&
				len(f.nodes["r2-a"].attached(t, f.jsonpath(t, "{.metadata.uid}", v1alpha2Claims, "imm"))) == 0
		})
		if got := f.requireOneUnit(t, "imm", "rack-2"); got != unit {
			t.Errorf("Immediate claim imm changed its unit to %s without a consumer, want it to keep %s", got, unit)
		}
		f.kubectl(t, "delete", v1alpha2Claims, "imm", "--wait=false")
		f.waitClaimGone(t, "imm")
	})

	t.Run("WaitForFirstConsumer claim", func(t *testing.T) {
		w := f.watch(t, "podschedulingcontexts",
			`{.metadata.name} selected={.spec.selectedNode} potential={.spec.potentialNodes}{"\n"}`)
		f.applyYAML(t, fabricPod("wffc", "resourceClaimTemplateName: one"))
		claim := f.podClaim(t, "wffc")
		waitFor(t, "wffc Running", func() bool { return f.phase(t, "wffc") == "Running" })
		node := f.podNode(t, "wffc")
		pool := map[string]string{"r1-a": "rack-1", "r2-a": "rack-2"}[node]
		unit := f.requireOneUnit(t, claim, pool)
		f.waitAttached(t, node, claim, unit)
		if got := f.jsonpath(t, "{.status.reservedFor[*].name}", v1alpha2Claims, claim); got != "wffc" {
			t.Errorf("claim %s reserved for %q, want wffc", claim, got)
		}
		// The scheduler asked the driver through the pod's context for the
		// node the pod runs on, and deleted the context after binding.
		if !seen(w, "wffc selected="+node, "r1-a", "r2-a") {
			t.Errorf("no PodSchedulingContext wffc with selectedNode %s among potential nodes r1-a and r2-a; watch:\n%s", node, w.Stdout)
		}
		requireContains(t, "events of pod wffc", f.events(t, "wffc"), "waiting for resource driver to allocate resource", "Scheduled")
		waitFor(t, "PodSchedulingContext wffc deleted after binding", func() bool {
			_, stderr, err := f.runKubectl("get", "podschedulingcontext", "wffc")
			return err != nil && strings.Contains(stderr, "NotFound")
		})

		f.allot(t, "delete", "pod", "wffc", "--timeout", "60s")
		f.waitClaimGone(t, claim)
	})

	t.Run("race for the last unit", func(t *testing.T) {
		// Both pods can only use rack-1's single unit.
		f.applyYAML(t, fabricPod("racer-a", "resourceClaimTemplateName: one", inRack("r1"))+"---\n"+
			fabricPod("racer-b", "resourceClaimTemplateName: one", inRack("r1")))
		var winner, loser string
		waitFor(t, "one racer Running", func() bool {
			a, b := f.phase(t, "racer-a"), f.phase(t, "racer-b")
			switch {
			case a == "Running" && b != "Running":
				winner, loser = "racer-a", "racer-b"
			case b == "Running" && a != "Running":
				winner, loser = "racer-b", "racer-a"
			case a == "Running" && b == "Running":
				t.Fatal("both racers Running with one unit in rack r1")
			}
			return winner != ""
		})
		winClaim, loseClaim := f.podClaim(t, winner), f.podClaim(t, loser)
		unit := f.requireOneUnit(t, winClaim, "rack-1")
		f.waitAttached(t, "r1-a", winClaim, unit)
		waitFor(t, loser+" unschedulable", func() bool {
			return f.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].status}`, "pod", loser) == "False"
		})
		time.Sleep(time.Second) // driver answers and scheduler retries meanwhile
		if got := f.phase(t, loser); got != "Pending" {
			t.Fatalf("%s is %s while %s holds the only unit, want Pending", loser, got, winner)
		}
		if h, ok := f.handle(t, loseClaim); ok {
			t.Fatalf("%s's claim %s is allocated %+v while %s holds the only unit", loser, loseClaim, h, winner)
		}
		t.Logf("%s waits: %s", loser, f.scheduledMessage(t, loser))

		f.allot(t, "delete", "pod", winner, "--timeout", "60s")
		f.waitClaimGone(t, winClaim)
		waitFor(t, loser+" Running once the unit is free", func() bool { return f.phase(t, loser) == "Running" })
		if node := f.podNode(t, loser); node != "r1-a" {
			t.Errorf("%s runs on %s, want r1-a", loser, node)
		}
		if got := f.requireOneUnit(t, loseClaim, "rack-1"); got != unit {
			t.Errorf("%s got %s, want the freed %s", loser, got, unit)
		}
		f.waitAttached(t, "r1-a", loseClaim, unit)
	})
}

// TestFabricRecovery is seed 003's recovery flow: a pod's
// WaitForFirstConsumer claim gets allocated in rack r1 after r1's only
// node has filled up; no node fits, so the scheduler sets
// deallocationRequested, the driver deallocates, the claim is allocated
// again in rack r2 and the pod runs there.
//
// The controller is held (SIGSTOP) while the scheduler selects r1-a and
// a filler pod takes r1-a's cpu, so that the allocation for r1-a comes
// after the node is full. The scheduler's safety-net retry stays long:
// a retry meanwhile would select r2-a before the driver allocates for
// r1-a, and there would be nothing to recover from.
func TestFabricRecovery(t *testing.T) {
	t.Parallel()
	f := newFabricCluster(t, []string{"--unschedulable-timeout", "10m"}, "r1-a", "r2-a")
	f.addNode(t, "r1-a", "r1", "cpu=1")
	f.addNode(t, "r2-a", "r2", "cpu=1")
	f.startController(t)
	f.pause(t)
	f.applyYAML(t, fabricParams("one", 1)+"---\n"+fabricTemplate("one", "one")+"---\n"+
		fabricPod("trainer", "resourceClaimTemplateName: one",
			"affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, preference: "+
				"{matchExpressions: [{key: "+rackLabel+", operator: In, values: [r1]}]}}]}}"))
	claim := f.podClaim(t, "trainer")
	waitFor(t, "trainer's PodSchedulingContext selects r1-a", func() bool {
		return f.jsonpath(t, "{.spec.selectedNode}", "podschedulingcontext", "trainer") == "r1-a"
	})
	f.applyYAML(t, fabricPod("filler", "", inRack("r1")))
	waitFor(t, "filler Running on r1-a", func() bool { return f.phase(t, "filler") == "Running" })
	if got := f.jsonpath(t, "{.spec.selectedNode}", "podschedulingcontext", "trainer"); got != "r1-a" {
		t.Fatalf("trainer's selected node changed to %q before the driver answered; nothing to recover from", got)
	}

	w := f.watch(t, v1alpha2Claims, `{.metadata.name} handle={.status.allocation.resourceHandles[0].data} deallocationRequested={.status.deallocationRequested}{"\n"}`)
	f.resume(t)
	waitFor(t, "trainer Running", func() bool { return f.phase(t, "trainer") == "Running" })
	if node := f.podNode(t, "trainer"); node != "r2-a" {
		t.Fatalf("trainer runs on %s, want r2-a (r1-a is full)", node)
	}
	unit := f.requireOneUnit(t, claim, "rack-2")
	f.waitAttached(t, "r2-a", claim, unit)
	for _, step := range [][]string{
		{claim, `"pool":"rack-1"`},
		{claim, `"pool":"rack-1"`, "deallocationRequested=true"},
		{claim, `"pool":"rack-2"`},
	} {
		if !seen(w, step...) {
			t.Errorf("claim %s never was %q; its changes:\n%s", claim, step[1:], w.Stdout)
		}
	}
	requireContains(t, "events of pod trainer", f.events(t, "trainer"), "Requested deallocation of claim default/"+claim)
}

// TestFabricControllerFailures: a driver controller that never answers
// leaves its pod Pending with the seed's message while other pods are
// scheduled (the scheduler retries the parked pod every second
// meanwhile); a controller killed (SIGKILL) in the middle of an allocation
// for the node the scheduler selected (the claim protected by its
// finalizer, the allocation not written) and restarted: the pod runs, the
// claim has one unit, and the pool's other unit still goes to the next
// claim, so none leaked. (A kill that lands after the allocation is
// tried again with a new pod, up to five times.)
func TestFabricControllerFailures(t *testing.T) {
	t.Parallel()
	f := newFabricCluster(t, []string{"--unschedulable-timeout", "1s"}, "r2-a")
	f.addNode(t, "r2-a", "r2", "cpu=4")
	f.startController(t)
	f.applyYAML(t, fabricParams("one", 1)+"---\n"+fabricTemplate("one", "one"))

	t.Run("driver never answers", func(t *testing.T) {
		f.pause(t)
		f.applyYAML(t, fabricPod("waiting", "resourceClaimTemplateName: one"))
		const msg = "waiting for resource driver to allocate resource"
		waitFor(t, "waiting's PodScheduled names the driver", func() bool {
			return strings.Contains(f.scheduledMessage(t, "waiting"), msg)
		})
		f.applyYAML(t, fabricPod("plain", ""))
		waitFor(t, "plain Running while the driver hangs", func() bool { return f.phase(t, "plain") == "Running" })
		time.Sleep(2 * time.Second) // the scheduler retries waiting (unschedulable timeout 1s)
		if got := f.phase(t, "waiting"); got != "Pending" {
			t.Fatalf("waiting is %s while its driver hangs, want Pending", got)
		}
		requireContains(t, "waiting's PodScheduled message", f.scheduledMessage(t, "waiting"), msg)
		requireContains(t, "events of pod waiting", f.events(t, "waiting"), "FailedScheduling: "+msg)
		claim := f.podClaim(t, "waiting")
		if h, ok := f.handle(t, claim); ok {
			t.Fatalf("claim %s allocated %+v by a stopped driver", claim, h)
		}

		f.resume(t)
		waitFor(t, "waiting Running once the driver answers", func() bool { return f.phase(t, "waiting") == "Running" })
		f.waitAttached(t, "r2-a", claim, f.requireOneUnit(t, claim, "rack-2"))
		f.allot(t, "delete", "pod", "waiting", "plain", "--timeout", "60s")
		f.waitClaimGone(t, claim)
	})

	t.Run("controller killed mid-allocation", func(t *testing.T) {
		w := f.watch(t, v1alpha2Claims, `{.metadata.name} finalizers={.metadata.finalizers} handle={.status.allocation.resourceHandles[0].data}{"\n"}`)
		var claim string
		for attempt := 1; ; attempt++ {
			victim := fmt.Sprintf("victim-%d", attempt)
			f.pause(t)
			f.applyYAML(t, fabricPod(victim, "resourceClaimTemplateName: one"))
			claim = f.podClaim(t, victim)
			waitFor(t, victim+"'s PodSchedulingContext selects r2-a", func() bool {
				return f.jsonpath(t, "{.spec.selectedNode}", "podschedulingcontext", victim) == "r2-a"
			})
			mid := f.killMidAllocation(t, w, claim)

			f.startController(t)
			waitFor(t, victim+" Running after the controller restart", func() bool { return f.phase(t, victim) == "Running" })
			unit := f.requireOneUnit(t, claim, "rack-2")
			f.waitAttached(t, "r2-a", claim, unit)
			if mid {
				break
			}
			// The kill came after the allocation was written: again.
			if attempt == 5 {
				t.Fatalf("in %d attempts the controller was never killed between protecting a claim and allocating it", attempt)
			}
			f.allot(t, "delete", "pod", victim, "--timeout", "60s")
			f.waitClaimGone(t, claim)
		}

		// rack-2's other unit is still free: no unit leaked.
		f.applyYAML(t, fabricPod("last", "resourceClaimTemplateName: one"))
		waitFor(t, "last Running on rack-2's other unit", func() bool { return f.phase(t, "last") == "Running" })
		lastClaim := f.podClaim(t, "last")
		if units := f.unitsOf(t, "rack-2", claim, lastClaim); !slices.Equal(units, []string{"rack-2-0", "rack-2-1"}) {
			t.Fatalf("victim and last hold %v, want rack-2-0 and rack-2-1", units)
		}
		f.waitAttached(t, "r2-a", lastClaim, f.requireOneUnit(t, lastClaim, "rack-2"))
	})
}
