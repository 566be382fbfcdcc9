package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// draPod is a pod whose containers print the claim they received (the
// example driver's CDI env) and then sleep, so that a test reads the logs
// while the pod holds its claim. claims are pod.spec.resourceClaims
// entries, one per line, indented for a list.
func draPod(ns, name, claims string, containers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  resourceClaims:
%s
  containers:
`, name, ns, claims)
	for _, c := range containers {
		fmt.Fprintf(&b, `  - name: %s
    image: busybox
    command: ["sh", "-c", "echo %s sees $GPU_DEVICE_IDS $GPU_CLAIM $GPU_SHARING_STRATEGY; ls /dev | grep gpu-example; sleep 1000"]
    resources: {claims: [{name: gpu}]}
`, c, c)
	}
	return b.String()
}

func gpuParams(ns, name, spec string) string {
	return fmt.Sprintf(`apiVersion: gpu.example.com/v1alpha1
kind: GpuClaimParameters
metadata: {name: %s, namespace: %s}
spec: %s
`, name, ns, spec)
}

func claimTemplate(ns, name, params string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimTemplate
metadata: {name: %s, namespace: %s}
spec:
  spec:
    resourceClassName: gpu.example.com
    parametersRef: {apiGroup: gpu.example.com, kind: GpuClaimParameters, name: %s}
`, name, ns, params)
}

func namespace(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\n"
}

// logLine waits for a container's log to contain "<container> sees " and
// returns that line.
func (c *cluster) logLine(t *testing.T, ns, pod, container string) string {
	t.Helper()
	var line string
	waitFor(t, pod+"/"+container+" printed its claim", func() bool {
		out, _, err := c.runKubectl("logs", "-n", ns, pod, "-c", container)
		if err != nil {
			return false
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, container+" sees ") {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

// TestDRAPartialGPU is seed 000's partial-GPU story with structured
// parameters: a pod with two containers sharing one claim from a template
// gets half a GPU, both containers see the same instance; with both halves
// taken a third pod waits; deleting the first pod unprepares its claim,
// deletes it, and the freed half goes to the waiting pod.
func TestDRAPartialGPU(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "dra-partial", draModel, nil, nil)
	d.applyYAML(t, namespace("ml")+"---\n"+gpuParams("ml", "half", `{count: 1, minimumMemory: 8Gi}`)+"---\n"+
		gpuParams("ml", "exact-half", `{count: 1, minimumMemory: 8Gi}`)+"---\n"+claimTemplate("ml", "half", "half"))
	// gpu-0 (16Gi) also fits 8Gi: take it first with a pod of its own so
	// that only the two halves remain.
	d.applyYAML(t, gpuParams("ml", "whole", `{count: 1, minimumMemory: 16Gi}`)+"---\n"+claimTemplate("ml", "whole", "whole")+"---\n"+
		draPod("ml", "whole", "  - {name: gpu, resourceClaimTemplateName: whole}", "main"))
	waitFor(t, "pod whole Running", func() bool { return d.phase(t, "ml", "whole") == "Running" })
	if line := d.logLine(t, "ml", "whole", "main"); !strings.Contains(line, "gpu-0") {
		t.Fatalf("pod whole: %q, want gpu-0 (the only 16Gi instance)", line)
	}

	d.applyYAML(t, draPod("ml", "trainer", "  - {name: gpu, resourceClaimTemplateName: half}", "train", "monitor"))
	waitFor(t, "pod trainer Running", func() bool { return d.phase(t, "ml", "trainer") == "Running" })
	train, monitor := d.logLine(t, "ml", "trainer", "train"), d.logLine(t, "ml", "trainer", "monitor")
	trainIDs, monitorIDs := strings.Fields(train)[2], strings.Fields(monitor)[2]
	if !strings.Contains(trainIDs, "half-") || trainIDs != monitorIDs {
		t.Fatalf("containers of one pod see different instances or not a half:\n%s\n%s", train, monitor)
	}
	claim := d.podClaim(t, "ml", "trainer")
	uid := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", claim, "-n", "ml")
	if owner := d.jsonpath(t, "{.metadata.ownerReferences[0].name}", "resourceclaim", claim, "-n", "ml"); owner != "trainer" {
		t.Errorf("generated claim %s is owned by %q, want pod trainer", claim, owner)
	}

	d.applyYAML(t, draPod("ml", "second", "  - {name: gpu, resourceClaimTemplateName: half}", "main"))
	waitFor(t, "pod second Running", func() bool { return d.phase(t, "ml", "second") == "Running" })
	d.applyYAML(t, draPod("ml", "third", "  - {name: gpu, resourceClaimTemplateName: half}", "main"))
	waitFor(t, "pod third unschedulable", func() bool {
		return d.jsonpath(t, "{.status.conditions[?(@.type==\"PodScheduled\")].reason}", "pod", "third", "-n", "ml") == "Unschedulable"
	})

	d.allot(t, "delete", "pod", "trainer", "-n", "ml", "--timeout", "60s")
	waitFor(t, "trainer's claim unprepared", func() bool { return d.stateLines(t, "unprepare", uid) == 1 })
	waitFor(t, "trainer's claim deleted", func() bool {
		_, _, err := d.runKubectl("get", "resourceclaim", claim, "-n", "ml")
		return err != nil
	})
	waitFor(t, "pod third Running on the freed half", func() bool { return d.phase(t, "ml", "third") == "Running" })
	if line := d.logLine(t, "ml", "third", "main"); strings.Fields(line)[2] != trainIDs {
		t.Errorf("third got %q, want the freed %s", line, trainIDs)
	}
	if n := d.stateLines(t, "prepare", uid); n != 1 {
		t.Errorf("trainer's claim prepared %d times, want 1", n)
	}
}

// TestDRAClaimsWait covers claims shared by two pods, a claim that cannot
// be met (allot explain quotes the failing clause), vendor parameters
// created after the pod, and a namespace at its claim quota.
func TestDRAClaimsWait(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "dra-wait", draModel, nil, nil)
	d.applyYAML(t, namespace("team"))

	t.Run("shared claim", func(t *testing.T) {
		d.applyYAML(t, gpuParams("team", "shared", `{count: 1, minimumMemory: 16Gi, sharing: {strategy: TimeSlicing}}`)+`---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: shared, namespace: team}
spec:
  resourceClassName: gpu.example.com
  parametersRef: {apiGroup: gpu.example.com, kind: GpuClaimParameters, name: shared}
---
`+draPod("team", "user-a", "  - {name: gpu, resourceClaimName: shared}", "main")+"---\n"+
			draPod("team", "user-b", "  - {name: gpu, resourceClaimName: shared}", "main"))
		waitFor(t, "both users Running", func() bool {
			return d.phase(t, "team", "user-a") == "Running" && d.phase(t, "team", "user-b") == "Running"
		})
		a, b := d.logLine(t, "team", "user-a", "main"), d.logLine(t, "team", "user-b", "main")
		if strings.Fields(a)[2] != strings.Fields(b)[2] || !strings.Contains(a, "TimeSlicing") {
			t.Fatalf("pods sharing a claim see:\n%s\n%s", a, b)
		}
		if n := d.jsonpath(t, "{.status.reservedFor[*].name}", "resourceclaim", "shared", "-n", "team"); len(strings.Fields(n)) != 2 {
			t.Fatalf("shared claim reservedFor = %q, want both pods", n)
		}
		uid := d.jsonpath(t, "{.metadata.uid}", "resourceclaim", "shared", "-n", "team")
		if n := d.stateLines(t, "prepare", uid); n != 1 {
			t.Errorf("shared claim prepared %d times on one node, want 1", n)
		}
		d.allot(t, "delete", "pod", "user-a", "user-b", "-n", "team", "--timeout", "60s")
		waitFor(t, "shared claim unprepared and deallocated", func() bool {
			return d.stateLines(t, "unprepare", uid) == 1 &&
				d.jsonpath(t, "{.status.allocation}", "resourceclaim", "shared", "-n", "team") == ""
		})
	})

	t.Run("unmet claim explained", func(t *testing.T) {
		d.applyYAML(t, gpuParams("team", "new-runtime", `{count: 1, minimumRuntimeVersion: "12.0.0"}`)+"---\n"+
			claimTemplate("team", "new-runtime", "new-runtime")+"---\n"+
			draPod("team", "needs-new", "  - {name: gpu, resourceClaimTemplateName: new-runtime}", "main"))
		var selector string
		waitFor(t, "the translated selector", func() bool {
			selector = d.jsonpath(t, "{.requests[0].partitionable.required[0].selector}", "resourceclaimparameters", "new-runtime", "-n", "team")
			return selector != ""
		})
		waitFor(t, "pod needs-new unschedulable", func() bool {
			return d.jsonpath(t, "{.status.conditions[?(@.type==\"PodScheduled\")].reason}", "pod", "needs-new", "-n", "team") == "Unschedulable"
		})
		out := d.allot(t, "explain", "pod", "needs-new", "-n", "team")
		clause := strings.TrimSpace(strings.Split(selector, "&&")[0])
		requireContains(t, "allot explain pod needs-new", out, "dra-wait", clause)
		if got := d.phase(t, "team", "needs-new"); got != "Pending" {
			t.Errorf("pod with an unmet claim is %s, want Pending", got)
		}
	})

	t.Run("parameters after the pod", func(t *testing.T) {
		d.applyYAML(t, claimTemplate("team", "late", "late")+"---\n"+
			draPod("team", "early", "  - {name: gpu, resourceClaimTemplateName: late}", "main"))
		time.Sleep(time.Second) // the scheduler and the node see the pod first
		if got := d.phase(t, "team", "early"); got != "Pending" {
			t.Fatalf("pod whose parameters do not exist yet is %s, want Pending", got)
		}
		d.applyYAML(t, gpuParams("team", "late", `{count: 1, minimumMemory: 8Gi}`))
		waitFor(t, "pod early Running once its parameters exist", func() bool { return d.phase(t, "team", "early") == "Running" })
		d.allot(t, "delete", "pod", "early", "-n", "team", "--timeout", "60s")
	})

	t.Run("hand-placed pod", func(t *testing.T) {
		pod := strings.Replace(draPod("team", "placed", "  - {name: gpu, resourceClaimTemplateName: any-gpu}", "main"),
			"spec:\n", "spec:\n  nodeName: dra-wait\n", 1)
		d.applyYAML(t, gpuParams("team", "any-gpu", `{count: 1}`)+"---\n"+claimTemplate("team", "any-gpu", "any-gpu")+"---\n"+pod)
		waitFor(t, "hand-placed pod Running with its claim", func() bool { return d.phase(t, "team", "placed") == "Running" })
		claim := d.podClaim(t, "team", "placed")
		if got := d.jsonpath(t, "{.status.reservedFor[0].name}", "resourceclaim", claim, "-n", "team"); got != "placed" {
			t.Errorf("claim %s reserved for %q, want pod placed", claim, got)
		}
		d.allot(t, "delete", "pod", "placed", "-n", "team", "--timeout", "60s")
	})

	t.Run("claim quota", func(t *testing.T) {
		d.applyYAML(t, namespace("quota")+`---
apiVersion: v1
kind: ResourceQuota
metadata: {name: claims, namespace: quota}
spec:
  hard: {count/resourceclaims.resource.k8s.io: "1"}
---
`+gpuParams("quota", "any", `{count: 1}`)+"---\n"+claimTemplate("quota", "any", "any")+"---\n"+
			draPod("quota", "first", "  - {name: gpu, resourceClaimTemplateName: any}", "main"))
		waitFor(t, "pod first Running", func() bool { return d.phase(t, "quota", "first") == "Running" })
		d.applyYAML(t, draPod("quota", "second", "  - {name: gpu, resourceClaimTemplateName: any}", "main"))
		waitFor(t, "pod second waits with the quota reason", func() bool {
			out, _, err := d.runKubectl("get", "events", "-n", "quota", "--field-selector", "involvedObject.name=second")
			return err == nil && strings.Contains(out, "exceeded quota")
		})
		if got := d.phase(t, "quota", "second"); got != "Pending" {
			t.Fatalf("pod over claim quota is %s, want Pending", got)
		}
		d.allot(t, "delete", "pod", "first", "-n", "quota", "--timeout", "60s")
		waitFor(t, "pod second Running once quota frees", func() bool { return d.phase(t, "quota", "second") == "Running" })
	})
}
