package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDriverDemos runs the shapes of the example DRA driver's demos
// (kubernetes-sigs/dra-example-driver, demo/examples), written as the
// project's own manifests in testdata/demos, against the test driver
// built on the upstream library (test/upstreamdriver), one cluster for
// all of them. Each subtest asserts what that demo's README says happens.
func TestDriverDemos(t *testing.T) {
	t.Parallel()
	// Four GPUs: the eviction-time demo runs three pods at once.
	u := newUpstreamClusterWith(t, "demos-node", []string{"--gpus", "4"})
	waitFor(t, "the driver's v1 slice", func() bool {
		return u.jsonpath(t, "{.items[*].spec.driver}", "resourceslices", "--field-selector", "spec.nodeName="+u.nodeName) == upstreamDriverName
	})
	u.applyYAML(t, upstreamClass)

	// initcontainer-shared-gpu: "Both the initContainer and main container
	// should show the same GPU ID".
	t.Run("initcontainer-shared-gpu", func(t *testing.T) {
		u.applyYAML(t, demoManifest(t, "initcontainer-shared-gpu"))
		init0 := devicesSeen(u.logLine(t, "initcontainer-shared-gpu", "pod0", "init0"))
		ctr0 := devicesSeen(u.logLine(t, "initcontainer-shared-gpu", "pod0", "ctr0"))
		if len(init0) != 1 || len(ctr0) != 1 || init0[0] != ctr0[0] {
			t.Fatalf("init0 sees %q, ctr0 sees %q; want the same one GPU", init0, ctr0)
		}
		waitFor(t, "pod0 Running", func() bool {
			return u.jsonpath(t, "{.status.phase}", "pod", "pod0", "-n", "initcontainer-shared-gpu") == "Running"
		})
		u.kubectl(t, "delete", "namespace", "initcontainer-shared-gpu", "--wait=true", "--timeout=60s")
	})

	// device-taint-pod-noexecute: "the pods using the tainted device are
	// evicted unless they have the matching tolerations"; the pod created
	// after the rule "never runs". (The demo's README has it scheduled and
	// evicted at once; allot, as Kubernetes' allocator, does not allocate
	// a device with an untolerated NoExecute taint, so it waits instead,
	// the taint named.)
	t.Run("device-taint-pod-noexecute", func(t *testing.T) {
		const ns = "device-taint-noexecute"
		u.applyYAML(t, demoManifest(t, "device-taint-pod-noexecute"))
		if seen := devicesSeen(u.logLine(t, ns, "pod-to-be-evicted", "ctr0")); len(seen) != 1 {
			t.Fatalf("pod-to-be-evicted sees %q, want one GPU", seen)
		}
		u.applyYAML(t, demoManifest(t, "device-taint-rule"))
		defer u.kubectl(t, "delete", "devicetaintrule", "example", "--ignore-not-found")
		waitFor(t, "pod-to-be-evicted evicted and gone", func() bool { return podGone(u, ns, "pod-to-be-evicted") })
		if ev := podEventReasons(t, u, ns, "pod-to-be-evicted"); !strings.Contains(ev, "DeviceTaintManagerEviction") {
			t.Errorf("events of pod-to-be-evicted: %s, want DeviceTaintManagerEviction", ev)
		}
		u.applyYAML(t, demoManifest(t, "device-taint-pod-no-execute"))
		waitFor(t, "pod-no-execute unschedulable for the taint", func() bool {
			msg := u.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].message}`, "pod", "pod-no-execute", "-n", ns)
			return strings.Contains(msg, "upstream.example.com/unhealthy=true:NoExecute")
		})
		if node := u.jsonpath(t, "{.spec.nodeName}", "pod", "pod-no-execute", "-n", ns); node != "" {
			t.Fatalf("pod-no-execute was bound to %s", node)
		}
		u.kubectl(t, "delete", "devicetaintrule", "example")
		u.kubectl(t, "delete", "namespace", ns, "--wait=true", "--timeout=60s")
	})

	// device-taint-configurable-pod-eviction-time: once the NoExecute rule
	// is applied, "pod-no-toleration" is evicted at once, the pod
	// tolerating the taint for a while (3 s here, 300 s in the demo) when
	// its time is up, and "pod-with-toleration" keeps running.
	t.Run("device-taint-configurable-pod-eviction-time", func(t *testing.T) {
		const ns = "device-taint-eviction-time"
		u.applyYAML(t, demoManifest(t, "device-taint-configurable-pod-eviction-time"))
		for _, p := range []string{"pod-no-toleration", "pod-with-toleration", "pod-with-3s-toleration"} {
			if seen := devicesSeen(u.logLine(t, ns, p, "ctr0")); len(seen) != 1 {
				t.Fatalf("%s sees %q, want one GPU", p, seen)
			}
		}
		u.applyYAML(t, demoManifest(t, "device-taint-rule"))
		defer u.kubectl(t, "delete", "devicetaintrule", "example", "--ignore-not-found")
		added, err := time.Parse(time.RFC3339, u.jsonpath(t, "{.spec.taint.timeAdded}", "devicetaintrule", "example"))
		if err != nil {
			t.Fatalf("the rule's timeAdded: %v", err)
		}
		waitFor(t, "pod-no-toleration evicted and gone", func() bool { return podGone(u, ns, "pod-no-toleration") })
		waitFor(t, "pod-with-3s-toleration evicted and gone", func() bool { return podGone(u, ns, "pod-with-3s-toleration") })
		// The eviction of the 3 s pod was not before timeAdded + 3 s
		// (events and timeAdded have whole seconds).
		at := u.jsonpath(t, `{.items[?(@.reason=="DeviceTaintManagerEviction")].lastTimestamp}`, "events", "-n", ns,
			"--field-selector", "involvedObject.name=pod-with-3s-toleration")
		evicted, err := time.Parse(time.RFC3339, strings.Fields(at + " x")[0])
		if err != nil {
			t.Fatalf("eviction event time %q: %v", at, err)
		}
		if evicted.Before(added.Add(3 * time.Second)) {
			t.Errorf("pod-with-3s-toleration evicted at %s, before the rule's timeAdded %s + 3 s", evicted, added)
		}
		// The pod tolerating the taint for good is still running: it was
		// watched from the rule's creation until the 3 s pod went (over
		// 3 s), and its tolerations give it no time at which it could be
		// evicted, so none will come later either.
		if phase := u.jsonpath(t, "{.status.phase}", "pod", "pod-with-toleration", "-n", ns); phase != "Running" {
			t.Fatalf("pod-with-toleration is %s, want Running", phase)
		}
		if ev := podEventReasons(t, u, ns, "pod-with-toleration"); strings.Contains(ev, "DeviceTaintManagerEviction") {
			t.Fatalf("pod-with-toleration has eviction events: %s", ev)
		}
		u.kubectl(t, "delete", "devicetaintrule", "example")
		u.kubectl(t, "delete", "namespace", ns, "--wait=true", "--timeout=60s")
	})

	// binding-conditions: the driver's devices wait for the binding
	// condition its controller sets (here 4 s after the allocation): the
	// pod's claim is allocated and the pod stays Pending without a node
	// meanwhile, then it is bound and runs, the condition True in the
	// claim's status. The driver is restarted to publish such devices,
	// with a driver-wide token for its controller (it writes claims not
	// bound to a node yet).
	t.Run("binding-conditions", func(t *testing.T) {
		const ns = "binding-conditions"
		if _, err := u.driver.Terminate(stopGrace); err != nil {
			t.Fatalf("stop the driver: %v", err)
		}
		u.startDriver(t, "--gpus", "4", "--binding-conditions", "--satisfy-binding-conditions", "4s",
			"--controller-kubeconfig", u.tokenKubeconfig(t, "driver", upstreamDriverName))
		waitFor(t, "the slice's devices with binding conditions", func() bool {
			return u.jsonpath(t, "{.items[*].spec.devices[0].bindingConditions[0]}", "resourceslices",
				"--field-selector", "spec.nodeName="+u.nodeName) == "BindingConditions"
		})
		u.applyYAML(t, demoManifest(t, "binding-conditions"))
		waitFor(t, "the claim allocated with the device's binding conditions", func() bool {
			return u.jsonpath(t, "{.items[*].status.allocation.devices.results[0].bindingConditions[0]}", "resourceclaims", "-n", ns) == "BindingConditions"
		})
		waitFor(t, "the waiting event", func() bool {
			return strings.Contains(podEventReasons(t, u, ns, "pod0"), "WaitingForBindingConditions")
		})
		// While the condition is not set (4 s), the pod has no node and
		// explain says what it waits for.
		explained := u.allot(t, "explain", "pod", "pod0", "-n", ns)
		if cond := u.jsonpath(t, `{.items[*].status.devices[*].conditions[?(@.type=="BindingConditions")].status}`, "resourceclaims", "-n", ns); cond != "True" {
			if node := u.jsonpath(t, "{.spec.nodeName}", "pod", "pod0", "-n", ns); node != "" {
				t.Fatalf("pod0 bound to %s before its binding condition is True", node)
			}
			if !strings.Contains(explained, "waiting for binding conditions of claim") || !strings.Contains(explained, "waiting for binding condition BindingConditions") {
				t.Errorf("allot explain of the waiting pod:\n%s", explained)
			}
		}
		if seen := devicesSeen(u.logLine(t, ns, "pod0", "ctr0")); len(seen) != 1 {
			t.Fatalf("pod0 sees %q, want one GPU", seen)
		}
		if cond := u.jsonpath(t, `{.items[*].status.devices[*].conditions[?(@.type=="BindingConditions")].status}`, "resourceclaims", "-n", ns); cond != "True" {
			t.Fatalf("the claim's binding condition is %q once pod0 runs, want True", cond)
		}
		u.kubectl(t, "delete", "namespace", ns, "--wait=true", "--timeout=60s")
	})
}

// podGone reports whether the pod no longer exists.
func podGone(u *upstreamCluster, ns, name string) bool {
	_, stderr, err := u.runKubectl("get", "pod", name, "-n", ns)
	return err != nil && strings.Contains(stderr, "NotFound")
}

// podEventReasons lists the reasons of the pod's events.
func podEventReasons(t *testing.T, u *upstreamCluster, ns, name string) string {
	t.Helper()
	return u.kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name, "-o", "jsonpath={.items[*].reason}")
}

func demoManifest(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "demos", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
