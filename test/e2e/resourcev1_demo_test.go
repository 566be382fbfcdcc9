package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// demoDriver publishes resource.k8s.io/v1 slices in this test, with its
// driver token as its kubelet plugin would. No plugin of it runs on the
// node: these tests check what allot's scheduler allocates; pods wait at
// the node for the driver.
const demoDriver = "gpu.demo.example.com"

// demoSlices are the upstream example driver's shapes on node: eight GPUs
// gpu-0..gpu-7 (model LATEST-GPU-MODEL, gpu-6 and gpu-7 NEXT-GPU-MODEL,
// 80Gi; class gpu.demo.example.com), and a partitionable card in its own
// pool (class card.demo.example.com): one counter set of 8 memory
// slices, a whole device (8) and two halves (4 each). Each class selects
// only devices that have the attributes its claims' selectors read: a
// selector reading an attribute a device lacks is an evaluation error,
// which fails the claim, as in Kubernetes.
func demoSlices(node string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: %[1]s}
spec:
  selectors:
  - cel: {expression: 'device.driver == "%[1]s" && "index" in device.attributes["%[1]s"]'}
  config:
  - opaque: {driver: %[1]s, parameters: {apiVersion: gpu.resource.example.com/v1alpha1, kind: GpuConfig, sharing: {strategy: TimeSlicing}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: card.demo.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "%[1]s" && "kind" in device.attributes["%[1]s"]'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[2]s-gpus}
spec:
  driver: %[1]s
  nodeName: %[2]s
  pool: {name: %[2]s, generation: 1, resourceSliceCount: 1}
  devices:
`, demoDriver, node)
	for i := range 8 {
		model := "LATEST-GPU-MODEL"
		if i >= 6 {
			model = "NEXT-GPU-MODEL"
		}
		fmt.Fprintf(&b, `  - name: gpu-%d
    attributes:
      index: {int: %d}
      model: {string: %s}
      pcieRoot: {string: pci-%d}
    capacity:
      memory: {value: 80Gi}
`, i, i, model, i/4)
	}
	fmt.Fprintf(&b, `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[2]s-card-counters}
spec:
  driver: %[1]s
  nodeName: %[2]s
  pool: {name: %[2]s-card, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: card-0
    counters:
      memory-slices: {value: "8"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[2]s-card-devices}
spec:
  driver: %[1]s
  nodeName: %[2]s
  pool: {name: %[2]s-card, generation: 1, resourceSliceCount: 2}
  devices:
  - name: card-0-whole
    attributes: {kind: {string: whole}}
    consumesCounters: [{counterSet: card-0, counters: {memory-slices: {value: "8"}}}]
  - name: card-0-half-0
    attributes: {kind: {string: half}}
    consumesCounters: [{counterSet: card-0, counters: {memory-slices: {value: "4"}}}]
  - name: card-0-half-1
    attributes: {kind: {string: half}}
    consumesCounters: [{counterSet: card-0, counters: {memory-slices: {value: "4"}}}]
`, demoDriver, node)
	return b.String()
}

// splitDemo splits demoSlices into the DeviceClasses and the
// ResourceSlices.
func splitDemo(all string) (classes, slices string) {
	var c, sl []string
	for _, doc := range strings.Split(all, "---\n") {
		if strings.Contains(doc, "kind: DeviceClass") {
			c = append(c, doc)
		} else {
			sl = append(sl, doc)
		}
	}
	return strings.Join(c, "---\n"), strings.Join(sl, "---\n")
}

// demoClaim is a v1 claim of the demo class in namespace demo.
func demoClaim(name, devices string) string {
	return fmt.Sprintf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: %s, namespace: demo}\nspec:\n  devices:\n%s", name, devices)
}

// demoPod is a pod in namespace demo using claims (entries of
// spec.resourceClaims, as YAML flow maps).
func demoPod(name string, claims ...string) string {
	var refs []string
	for _, c := range claims {
		refs = append(refs, "{name: "+strings.SplitN(strings.TrimPrefix(c, "{name: "), ",", 2)[0]+"}")
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: demo}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [%s]
  containers:
  - name: ctr0
    image: busybox
    command: ["sleep", "1000"]
    resources: {claims: [%s]}
  - name: ctr1
    image: busybox
    command: ["sleep", "1000"]
    resources: {claims: [%s]}
`, name, strings.Join(claims, ", "), strings.Join(refs, ", "), strings.Join(refs, ", "))
}

// allocated waits for the claim's allocation and returns its results as
// "request=pool/device" sorted, and whether each is admin access.
func (d *draCluster) allocated(t *testing.T, claim string) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := d.jsonpath(t, `{range .status.allocation.devices.results[*]}{.request}={.pool}/{.device}{.adminAccess} {end}`, "resourceclaim", claim, "-n", "demo")
		if out = strings.Fields(got); len(out) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s not allocated; pods: %s", claim, d.kubectl(t, "get", "pods", "-n", "demo",
				"-o", `jsonpath={range .items[*]}{.metadata.name}: {.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}{end}`))
		}
		time.Sleep(200 * time.Millisecond)
	}
	sort.Strings(out)
	return out
}

func (d *draCluster) generatedClaim(t *testing.T, pod string) string {
	t.Helper()
	return d.podClaim(t, "demo", pod)
}

// TestResourceV1DemoShapes: the shapes of the upstream example driver's
// demo manifests, against v1 slices, with the allocations they get.
func TestResourceV1DemoShapes(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "demo-node", draModel, nil, nil)
	node := d.nodeName
	// The driver publishes its slices with its own token, as its kubelet
	// plugin would; the classes and the namespace are an admin's.
	classes, slices := splitDemo(demoSlices(node))
	d.applyYAML(t, namespace("demo")+"---\n"+classes)
	driver := strings.TrimSpace(d.allot(t, "token", "create", "--data-dir", d.dataDir, "--role", "driver", "--name", demoDriver))
	f := filepath.Join(t.TempDir(), "slices.yaml")
	if err := os.WriteFile(f, []byte(slices), 0o600); err != nil {
		t.Fatal(err)
	}
	waitAccepted(t, d.cluster, "--token", driver, "get", "resourceslices", "-o", "name")
	requireLines(t, "the driver publishes its slices", d.kubectl(t, "--token", driver, "apply", "-f", f),
		"resourceslice.resource.k8s.io/"+node+"-gpus created", "resourceslice.resource.k8s.io/"+node+"-card-counters created",
		"resourceslice.resource.k8s.io/"+node+"-card-devices created")

	t.Run("one GPU per pod from a template", func(t *testing.T) {
		d.applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: single-gpu, namespace: demo}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: `+demoDriver+`
          selectors:
          - cel: {expression: 'device.attributes["`+demoDriver+`"].model == "LATEST-GPU-MODEL"'}
`)
		d.applyYAML(t, demoPod("tmpl-0", "{name: gpu, resourceClaimTemplateName: single-gpu}")+"---\n"+
			demoPod("tmpl-1", "{name: gpu, resourceClaimTemplateName: single-gpu}"))
		a, b := d.allocated(t, d.generatedClaim(t, "tmpl-0")), d.allocated(t, d.generatedClaim(t, "tmpl-1"))
		if len(a) != 1 || len(b) != 1 || a[0] == b[0] || !strings.HasPrefix(a[0], "gpu="+node+"/gpu-") {
			t.Errorf("template claims got %v and %v, want one distinct GPU each", a, b)
		}
		for _, r := range append(a, b...) {
			if strings.HasSuffix(r, "gpu-6") || strings.HasSuffix(r, "gpu-7") {
				t.Errorf("selector model == LATEST-GPU-MODEL allocated %s", r)
			}
		}
	})

	t.Run("two requests in one claim on one PCIe root", func(t *testing.T) {
		d.applyYAML(t, demoClaim("pair", `    requests:
    - {name: a, exactly: {deviceClassName: `+demoDriver+`}}
    - {name: b, exactly: {deviceClassName: `+demoDriver+`}}
    constraints:
    - {requests: [a, b], matchAttribute: `+demoDriver+`/pcieRoot}
`)+"---\n"+demoPod("pair-user", "{name: pair, resourceClaimName: pair}"))
		got := d.allocated(t, "pair")
		if len(got) != 2 || got[0][2:] == got[1][2:] {
			t.Fatalf("pair got %v, want two distinct devices", got)
		}
		root := func(r string) int {
			var i int
			fmt.Sscanf(r[strings.LastIndex(r, "gpu-")+4:], "%d", &i)
			return i / 4
		}
		if root(got[0]) != root(got[1]) {
			t.Errorf("matchAttribute pcieRoot: %v are on different roots", got)
		}
	})

	t.Run("a claim shared by two pods", func(t *testing.T) {
		d.applyYAML(t, demoClaim("shared", `    requests: [{name: gpu, exactly: {deviceClassName: `+demoDriver+`}}]
`)+"---\n"+demoPod("share-0", "{name: gpu, resourceClaimName: shared}")+"---\n"+demoPod("share-1", "{name: gpu, resourceClaimName: shared}"))
		got := d.allocated(t, "shared")
		waitFor(t, "both pods reserved", func() bool {
			return len(strings.Fields(d.jsonpath(t, "{.status.reservedFor[*].name}", "resourceclaim", "shared", "-n", "demo"))) == 2
		})
		if len(got) != 1 {
			t.Errorf("shared claim got %v, want one device", got)
		}
	})

	t.Run("opaque config from class and claim", func(t *testing.T) {
		d.applyYAML(t, demoClaim("configured", `    requests: [{name: gpu, exactly: {deviceClassName: `+demoDriver+`}}]
    config:
    - requests: [gpu]
      opaque: {driver: `+demoDriver+`, parameters: {apiVersion: gpu.resource.example.com/v1alpha1, kind: GpuConfig, sharing: {strategy: SpacePartitioning}}}
`)+"---\n"+demoPod("config-user", "{name: gpu, resourceClaimName: configured}"))
		d.allocated(t, "configured")
		got := d.jsonpath(t, `{range .status.allocation.devices.config[*]}{.source}:{.opaque.parameters.sharing.strategy} {end}`, "resourceclaim", "configured", "-n", "demo")
		if strings.TrimSpace(got) != "FromClass:TimeSlicing FromClaim:SpacePartitioning" {
			t.Errorf("allocation config = %q, want the class's then the claim's", got)
		}
	})

	t.Run("prioritized alternatives", func(t *testing.T) {
		d.applyYAML(t, demoClaim("prefer-next", `    requests:
    - name: gpu
      firstAvailable:
      - {name: next, deviceClassName: `+demoDriver+`, selectors: [{cel: {expression: 'device.attributes["`+demoDriver+`"].model == "NEXT-GPU-MODEL"'}}]}
      - {name: any, deviceClassName: `+demoDriver+`}
`)+"---\n"+demoPod("prefer-user", "{name: gpu, resourceClaimName: prefer-next}"))
		got := d.allocated(t, "prefer-next")
		if len(got) != 1 || !strings.HasPrefix(got[0], "gpu/next="+node+"/gpu-") || !(strings.HasSuffix(got[0], "gpu-6") || strings.HasSuffix(got[0], "gpu-7")) {
			t.Errorf("prefer-next got %v, want a NEXT-GPU-MODEL through subrequest next", got)
		}
	})

	t.Run("partitionable device: counters", func(t *testing.T) {
		d.applyYAML(t, demoClaim("whole-card", `    requests: [{name: card, exactly: {deviceClassName: card.demo.example.com, selectors: [{cel: {expression: 'device.attributes["`+demoDriver+`"].kind == "whole"'}}]}}]
`)+"---\n"+demoClaim("half-card", `    requests: [{name: card, exactly: {deviceClassName: card.demo.example.com, selectors: [{cel: {expression: 'device.attributes["`+demoDriver+`"].kind == "half"'}}]}}]
`)+"---\n"+demoPod("half-user", "{name: card, resourceClaimName: half-card}"))
		if got := d.allocated(t, "half-card"); len(got) != 1 || !strings.Contains(got[0], node+"-card/card-0-half-") {
			t.Fatalf("half-card got %v", got)
		}
		d.applyYAML(t, demoPod("whole-user", "{name: card, resourceClaimName: whole-card}"))
		waitFor(t, "whole-user unschedulable: the half took 4 of the card's 8 memory slices", func() bool {
			return strings.Contains(d.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].message}`, "pod", "whole-user", "-n", "demo"), "0/1 nodes")
		})
		if a := d.jsonpath(t, "{.status.allocation}", "resourceclaim", "whole-card", "-n", "demo"); a != "" {
			t.Errorf("whole-card allocated %s while a half is in use", a)
		}
		// allot explain names the counter that blocks.
		if out := d.allot(t, "explain", "pod", "whole-user", "-n", "demo"); !strings.Contains(out, "memory-slices") {
			t.Errorf("allot explain does not name the counter:\n%s", out)
		}
	})

	t.Run("admin access", func(t *testing.T) {
		all := `    requests: [{name: gpu, exactly: {deviceClassName: ` + demoDriver + `, allocationMode: All, adminAccess: true,
      selectors: [{cel: {expression: '"index" in device.attributes["` + demoDriver + `"]'}}]}}]
`
		// Refused in a namespace without the label, naming the field.
		f := filepath.Join(t.TempDir(), "admin.yaml")
		if err := os.WriteFile(f, []byte(demoClaim("watch-all", all)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, err := d.runKubectl("apply", "-f", f); err == nil || !strings.Contains(stderr, "adminAccess") {
			t.Fatalf("admin access in an unlabelled namespace: err=%v %s", err, stderr)
		}
		d.kubectl(t, "label", "namespace", "demo", "resource.kubernetes.io/admin-access=true")
		d.applyYAML(t, demoClaim("watch-all", all)+"---\n"+demoPod("admin-user", "{name: gpu, resourceClaimName: watch-all}"))
		got := d.allocated(t, "watch-all")
		if len(got) != 8 {
			t.Fatalf("admin claim got %v, want all 8 GPUs, in use or not", got)
		}
		for _, r := range got {
			if !strings.HasSuffix(r, "true") {
				t.Errorf("result %s without adminAccess", r)
			}
		}
	})
}
