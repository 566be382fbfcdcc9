package e2e

import (
	"os"
	"path/filepath"
	"slices"
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

	// gpu-allow-multiple-allocations: "Both pods should show the same GPU
	// ID, confirming they are sharing the same physical GPU, each
	// consuming their requested capacity slice."
	t.Run("gpu-allow-multiple-allocations", func(t *testing.T) {
		startDemoDriver(t, u, "shared-gpu.example.com", "shared-gpu", "--gpus", "1", "--gpu-allow-multiple-allocations")
		u.applyYAML(t, demoManifest(t, "gpu-allow-multiple-allocations"))
		pod0, _ := sharedDevice(t, u, "gpu-allow-multiple-allocations", "GPU_DEVICE_")
		if w := "GPU_DEVICE_0_MEMORY=8Gi"; !slices.Contains(pod0, w) {
			t.Errorf("pod0 sees %q, want %s (its share)", pod0, w)
		}
		u.kubectl(t, "delete", "namespace", "gpu-allow-multiple-allocations", "--wait=true", "--timeout=60s")
	})

	// gpu-allow-multiple-allocations-partitionable: "Both pods should show
	// the same GPU partition device ID, confirming they are sharing the
	// same partition, each having consumed their requested capacity
	// slice."
	t.Run("gpu-allow-multiple-allocations-partitionable", func(t *testing.T) {
		startDemoDriver(t, u, "partitions.example.com", "shared-partition-all", "--gpus", "1", "--gpu-partitions", "2", "--gpu-allow-multiple-allocations")
		u.applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: shared-partition}
spec:
  selectors:
  - cel: {expression: 'device.driver == "partitions.example.com" && has(device.attributes["partitions.example.com"].partition)'}
`)
		u.applyYAML(t, demoManifest(t, "gpu-allow-multiple-allocations-partitionable"))
		pod0, _ := sharedDevice(t, u, "gpu-allow-multiple-allocations-partitionable", "GPU_DEVICE_0_PARTITION_")
		if w := "GPU_DEVICE_0_PARTITION_0_MEMORY=4Gi"; !slices.Contains(pod0, w) && !slices.Contains(pod0, strings.Replace(w, "_0_MEMORY", "_1_MEMORY", 1)) {
			t.Errorf("pod0 sees %q, want its 4Gi share of a partition", pod0)
		}
		u.kubectl(t, "delete", "namespace", "gpu-allow-multiple-allocations-partitionable", "--wait=true", "--timeout=60s")
	})

	// net-consumable-capacity: "Each container should have
	// NET_DEVICE_<N>_INGRESS_RATE and NET_DEVICE_<N>_EGRESS_RATE
	// environment variables reflecting the allocated bandwidth ... Both
	// pods may reference the same physical NIC index (0)".
	t.Run("net-consumable-capacity", func(t *testing.T) {
		startDemoDriver(t, u, "net.example.com", "shared-nic", "--profile", "net", "--nics", "1")
		u.applyYAML(t, demoManifest(t, "net-consumable-capacity"))
		pod0, pod1 := sharedDevice(t, u, "net-consumable-capacity", "NET_DEVICE_")
		for pod, want := range map[string][]string{
			"pod0": {"NET_DEVICE_0_INGRESSBANDWIDTH=10G", "NET_DEVICE_0_EGRESSBANDWIDTH=5G"},
			"pod1": {"NET_DEVICE_0_INGRESSBANDWIDTH=5G", "NET_DEVICE_0_EGRESSBANDWIDTH=5G"},
		} {
			seen := pod0
			if pod == "pod1" {
				seen = pod1
			}
			for _, w := range want {
				if !slices.Contains(seen, w) {
					t.Errorf("%s sees %q, want %s", pod, seen, w)
				}
			}
		}
		u.kubectl(t, "delete", "namespace", "net-consumable-capacity", "--wait=true", "--timeout=60s")
	})

	// extended-resource-request: "Each pod should get one GPU. The
	// scheduler records the allocation in
	// pod.status.extendedResourceClaimStatus." pod1's example.com/gpu
	// needs the class's extendedResourceName (the demo's chart option).
	t.Run("extended-resource-request", func(t *testing.T) {
		const ns = "extended-resource-request"
		u.applyYAML(t, strings.Replace(upstreamClass, "spec:\n", "spec:\n  extendedResourceName: example.com/gpu\n", 1))
		defer u.applyYAML(t, upstreamClass)
		u.applyYAML(t, demoManifest(t, "extended-resource-request"))
		var seen []string
		claims := map[string]string{}
		for _, p := range []string{"pod0", "pod1"} {
			gpus := devicesSeen(u.logLine(t, ns, p, "ctr0"))
			if len(gpus) != 1 {
				t.Fatalf("%s sees %q, want one GPU", p, gpus)
			}
			seen = append(seen, gpus...)
			claim := u.jsonpath(t, "{.status.extendedResourceClaimStatus.resourceClaimName}", "pod", p, "-n", ns)
			if !strings.HasPrefix(claim, p+"-extended-resources-") {
				t.Fatalf("%s records extended-resource claim %q", p, claim)
			}
			if a := u.jsonpath(t, `{.metadata.annotations.resource\.kubernetes\.io/extended-resource-claim}`, "resourceclaim", claim, "-n", ns); a != "true" {
				t.Errorf("claim %s: annotation %q, want true", claim, a)
			}
			claims[p] = claim
		}
		if seen[0] == seen[1] {
			t.Fatalf("pod0 and pod1 both see %s, want a GPU each", seen[0])
		}
		// The claims go with their pods.
		u.kubectl(t, "delete", "pod", "pod0", "-n", ns, "--wait=true", "--timeout=60s")
		waitFor(t, "pod0's claim gone with it", func() bool {
			_, stderr, err := u.runKubectl("get", "resourceclaim", claims["pod0"], "-n", ns)
			return err != nil && strings.Contains(stderr, "NotFound")
		})
		u.kubectl(t, "delete", "namespace", ns, "--wait=true", "--timeout=60s")
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

	// device-taint-pod-noschedule: a NoSchedule rule keeps the running pod
	// running and the pod created afterwards from being scheduled.
	t.Run("device-taint-pod-noschedule", func(t *testing.T) {
		const ns = "device-taint-noschedule"
		u.applyYAML(t, demoManifest(t, "device-taint-pod-noschedule"))
		if seen := devicesSeen(u.logLine(t, ns, "pod-keeps-running", "ctr0")); len(seen) != 1 {
			t.Fatalf("pod-keeps-running sees %q, want one GPU", seen)
		}
		u.applyYAML(t, demoManifest(t, "device-taint-rule-noschedule"))
		defer u.kubectl(t, "delete", "devicetaintrule", "example", "--ignore-not-found")
		u.applyYAML(t, demoManifest(t, "device-taint-pod-not-scheduled"))
		waitFor(t, "pod-no-schedule unschedulable for the taint", func() bool {
			msg := u.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].message}`, "pod", "pod-no-schedule", "-n", ns)
			return strings.Contains(msg, "upstream.example.com/unhealthy=true:NoSchedule")
		})
		// The running pod stays: watched until the scheduler acted on the
		// rule (above); a NoSchedule taint gives the eviction controller
		// nothing to do, at any time.
		if phase := u.jsonpath(t, "{.status.phase}", "pod", "pod-keeps-running", "-n", ns); phase != "Running" {
			t.Fatalf("pod-keeps-running is %s, want Running", phase)
		}
		if ev := podEventReasons(t, u, ns, "pod-keeps-running"); strings.Contains(ev, "DeviceTaintManagerEviction") {
			t.Fatalf("pod-keeps-running has eviction events: %s", ev)
		}
		u.kubectl(t, "delete", "devicetaintrule", "example")
		u.kubectl(t, "delete", "namespace", ns, "--wait=true", "--timeout=60s")
	})

	// device-taint-pod-toleration: with the NoExecute rule in place, the
	// pod whose claim tolerates the taint is scheduled and runs; the other
	// is not scheduled.
	t.Run("device-taint-pod-toleration", func(t *testing.T) {
		const ns = "device-taint-toleration"
		u.applyYAML(t, demoManifest(t, "device-taint-rule"))
		defer u.kubectl(t, "delete", "devicetaintrule", "example", "--ignore-not-found")
		u.applyYAML(t, demoManifest(t, "device-taint-pod-toleration"))
		if seen := devicesSeen(u.logLine(t, ns, "pod-with-toleration", "ctr0")); len(seen) != 1 {
			t.Fatalf("pod-with-toleration sees %q, want one GPU", seen)
		}
		waitFor(t, "pod-without-toleration unschedulable for the taint", func() bool {
			msg := u.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].message}`, "pod", "pod-without-toleration", "-n", ns)
			return strings.Contains(msg, "upstream.example.com/unhealthy=true:NoExecute")
		})
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

// startDemoDriver starts another instance of the test driver on the demo
// node, as driver name with its own node-driver token and args (its
// profile), and a DeviceClass class selecting its devices; it waits until
// the node agent registered it and its slice is published.
func startDemoDriver(t *testing.T, u *upstreamCluster, name, class string, args ...string) {
	t.Helper()
	kc := u.tokenKubeconfig(t, "node-driver", name+"@"+u.nodeName)
	all := append([]string{"--driver-name", name, "--node-name", u.nodeName, "--kubeconfig", kc,
		"--kubelet-registrar-directory-path", u.registry, "--kubelet-plugins-directory-path", u.plugins,
		"--cdi-root", u.cdiDir}, args...)
	p, err := startProc("driver "+name, childEnv(u.home), upstreamBin, all...)
	if err != nil {
		t.Fatal(err)
	}
	u.procs = append(u.procs, p)
	waitFor(t, "driver "+name+" registered and publishing", func() bool {
		return strings.Contains(u.node.Stderr.String(), "driver="+name+" ") &&
			u.jsonpath(t, "{.items[*].spec.driver}", "resourceslices", "--field-selector", "spec.driver="+name) != ""
	})
	u.applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: `+class+`}
spec:
  selectors:
  - cel: {expression: 'device.driver == "`+name+`"'}
`)
}

// sharedDevice checks that both pods of a share demo run and see the same
// one device of prefix (GPU_DEVICE_, NET_DEVICE_), each with its own
// share; it returns what each saw.
func sharedDevice(t *testing.T, u *upstreamCluster, ns, prefix string) (pod0, pod1 []string) {
	t.Helper()
	pod0, pod1 = devicesSeen(u.logLine(t, ns, "pod0", "ctr0")), devicesSeen(u.logLine(t, ns, "pod1", "ctr0"))
	device := func(seen []string) string {
		for _, v := range seen {
			if k, val, _ := strings.Cut(v, "="); strings.HasPrefix(k, prefix) && !strings.Contains(strings.TrimPrefix(k, prefix), "_") {
				return val
			}
		}
		return ""
	}
	share := func(seen []string) string {
		for _, v := range seen {
			if k, val, _ := strings.Cut(v, "="); strings.HasSuffix(k, "_SHARE") {
				return val
			}
		}
		return ""
	}
	if d0, d1 := device(pod0), device(pod1); d0 == "" || d0 != d1 {
		t.Fatalf("pod0 sees %q, pod1 sees %q: want the same one device", pod0, pod1)
	}
	if s0, s1 := share(pod0), share(pod1); s0 == "" || s0 == s1 {
		t.Fatalf("pod0 sees %q, pod1 sees %q: want a share each, distinct", pod0, pod1)
	}
	return pod0, pod1
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
