package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// v1Manifests are one object of every resource.k8s.io/v1 kind, in the
// shapes of the upstream example driver's demos.
const v1Manifests = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.v1.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: v1-node-gpus}
spec:
  driver: gpu.v1.example.com
  nodeName: v1-node
  pool: {name: v1-node, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      index: {int: 0}
      model: {string: LATEST-GPU-MODEL}
      driverVersion: {version: 1.0.0}
    capacity:
      memory: {value: 80Gi}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: maintenance}
spec:
  deviceSelector: {driver: gpu.v1.example.com, pool: v1-node}
  taint: {key: example.com/maintenance, effect: NoSchedule}
---
apiVersion: v1
kind: Namespace
metadata: {name: v1-demo}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: single-gpu, namespace: v1-demo}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.v1.example.com
          selectors:
          - cel: {expression: 'device.capacity["gpu.v1.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-alternatives, namespace: v1-demo}
spec:
  devices:
    requests:
    - name: gpu
      firstAvailable:
      - {name: big, deviceClassName: gpu.v1.example.com, selectors: [{cel: {expression: 'device.attributes["gpu.v1.example.com"].model == "NEXT-GPU"'}}]}
      - {name: any, deviceClassName: gpu.v1.example.com}
    config:
    - requests: [gpu]
      opaque:
        driver: gpu.v1.example.com
        parameters: {apiVersion: gpu.resource.example.com/v1alpha1, kind: GpuConfig, sharing: {strategy: TimeSlicing}}
`

// TestResourceV1Kubectl: kubectl applies, lists, shows and deletes every
// resource.k8s.io/v1 kind, and lists claims of both versions as one set.
func TestResourceV1Kubectl(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t)
	c.applyYAML(t, v1Manifests)
	c.applyYAML(t, `apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: seed-claim, namespace: v1-demo}
spec: {resourceClassName: gpu.example.com}
`)
	requireTable(t, c.kubectl(t, "get", "deviceclasses"), []string{"NAME", "AGE"},
		map[string]map[string]string{"gpu.v1.example.com": {}})
	requireTable(t, c.kubectl(t, "get", "resourceslices"), []string{"NAME", "NODE", "DRIVER", "POOL", "AGE"},
		map[string]map[string]string{"v1-node-gpus": {"NODE": "v1-node", "DRIVER": "gpu.v1.example.com", "POOL": "v1-node"}})
	requireTable(t, c.kubectl(t, "get", "devicetaintrules"), []string{"NAME", "AGE"},
		map[string]map[string]string{"maintenance": {}})
	requireTable(t, c.kubectl(t, "get", "resourceclaimtemplates", "-n", "v1-demo"), []string{"NAME", "AGE"},
		map[string]map[string]string{"single-gpu": {}})
	// Claims of both versions, through v1 (the preferred version) and
	// through allot's CLI.
	for _, out := range []string{c.kubectl(t, "get", "resourceclaims", "-A"), c.allot(t, "get", "resourceclaims", "-A")} {
		requireTable(t, out, []string{"NAMESPACE", "NAME", "STATE", "AGE"},
			map[string]map[string]string{"two-alternatives": {"STATE": "pending"}, "seed-claim": {"STATE": "pending"}})
	}
	// Read back as written: defaults added, nothing lost.
	obj := c.getYAML(t, "resourceclaim", "two-alternatives", "-n", "v1-demo")
	requireFields(t, "v1 claim", obj, map[string]any{
		"apiVersion": "resource.k8s.io/v1",
		"spec.devices.requests.0.firstAvailable.0.allocationMode":  "ExactCount",
		"spec.devices.requests.0.firstAvailable.1.count":           1,
		"spec.devices.config.0.opaque.parameters.sharing.strategy": "TimeSlicing",
	})
	if out := c.kubectl(t, "get", "resourceslice", "v1-node-gpus", "-o", "jsonpath={.spec.devices[0].capacity.memory.value}"); out != "80Gi" {
		t.Errorf("slice capacity reads %q", out)
	}
	if out := c.kubectl(t, "describe", "deviceclass", "gpu.v1.example.com"); !strings.Contains(out, `device.driver == "gpu.example.com"`) {
		t.Errorf("kubectl describe deviceclass:\n%s", out)
	}
	if out := c.kubectl(t, "explain", "resourceslices.spec.devices.capacity"); !strings.Contains(out, "FIELD") && !strings.Contains(out, "capacity") {
		t.Errorf("kubectl explain:\n%s", out)
	}
	// A field of a feature Kubernetes 1.37 has off is refused, naming it.
	f := filepath.Join(t.TempDir(), "list-attrs.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: list-attrs}
spec:
  driver: gpu.v1.example.com
  nodeName: v1-node
  pool: {name: v1-node, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {cores: {ints: [1, 2]}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := c.runKubectl("apply", "-f", f)
	if err == nil || !strings.Contains(errOut, "spec.devices[0].attributes[cores]") || !strings.Contains(errOut, "DRAListTypeAttributes") {
		t.Errorf("a list-typed attribute: err=%v stderr=%s", err, errOut)
	}
	for _, kind := range []string{"devicetaintrule/maintenance", "resourceslice/v1-node-gpus", "deviceclass/gpu.v1.example.com"} {
		c.kubectl(t, "delete", kind)
	}
	c.kubectl(t, "delete", "resourceclaim", "two-alternatives", "seed-claim", "-n", "v1-demo")
	c.kubectl(t, "delete", "resourceclaimtemplate", "single-gpu", "-n", "v1-demo")
	if out := c.kubectl(t, "get", "resourceclaims", "-A", "-o", "name"); out != "" {
		t.Errorf("claims left after deletion: %s", out)
	}
}

// TestResourceV1Allocation: on one GPU node of allot's example driver, a
// pod with a v1 claim (from a v1 template, allocated by allot's scheduler
// from the driver's seed slice seen as v1 devices) and a pod with a
// v1alpha2 claim get different devices.
func TestResourceV1Allocation(t *testing.T) {
	t.Parallel()
	d := newDRACluster(t, "v1-gpu-node", draModel, nil, nil)
	d.applyYAML(t, namespace("mixed")+`---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu-v1}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: whole-16gi, namespace: mixed}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu-v1
          selectors:
          - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("16Gi")) >= 0'}
`)
	d.applyYAML(t, gpuParams("mixed", "whole", `{count: 1, minimumMemory: 16Gi}`)+"---\n"+claimTemplate("mixed", "seed-whole", "whole")+"---\n"+
		gpuParams("mixed", "half", `{count: 1, minimumMemory: 8Gi}`)+"---\n"+claimTemplate("mixed", "seed-half", "half"))

	// The v1 claim takes the one 16Gi leaf, gpu-0, seen as v1 device
	// <node>/gpu-0.
	d.applyYAML(t, draPod("mixed", "v1-user", "  - name: gpu\n    resourceClaimTemplateName: whole-16gi", "main"))
	var v1Device string
	waitFor(t, "the v1 claim allocated", func() bool {
		claim := d.podClaim(t, "mixed", "v1-user")
		if claim == "" {
			return false
		}
		v1Device = d.jsonpath(t, "{.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}", "resourceclaim", claim, "-n", "mixed")
		return v1Device != "/"
	})
	if v1Device != d.nodeName+"/gpu-0" {
		t.Fatalf("v1 claim allocated %s, want %s/gpu-0", v1Device, d.nodeName)
	}
	if node := d.jsonpath(t, "{.spec.nodeName}", "pod", "v1-user", "-n", "mixed"); node != d.nodeName {
		t.Fatalf("v1 pod bound to %q", node)
	}
	// The node prepared it through allot's driver, which got the instance
	// the device stands for.
	if line := d.logLine(t, "mixed", "v1-user", "main"); !strings.Contains(line, "gpu-0") {
		t.Errorf("the v1 pod's container sees %q, want gpu-0", line)
	}
	// A v1alpha2 claim for a whole 16Gi GPU finds it taken through the
	// other API: the pod waits; one for an 8Gi half gets one.
	d.applyYAML(t, draPod("mixed", "seed-whole-user", "  - name: gpu\n    resourceClaimTemplateName: seed-whole", "main"))
	d.applyYAML(t, draPod("mixed", "seed-half-user", "  - name: gpu\n    resourceClaimTemplateName: seed-half", "main"))
	var halfInstance string
	waitFor(t, "the 8Gi v1alpha2 claim allocated", func() bool {
		claim := d.podClaim(t, "mixed", "seed-half-user")
		if claim == "" {
			return false
		}
		halfInstance = d.jsonpath(t, "{.status.allocation.resourceHandles[0].structuredData.partitionable.instances[0].id}", v1alpha2Claims, claim, "-n", "mixed")
		return halfInstance != ""
	})
	if !strings.HasPrefix(halfInstance, "gpu-1/halves/") {
		t.Errorf("the 8Gi claim got %s, want a half of gpu-1", halfInstance)
	}
	waitFor(t, "the 16Gi v1alpha2 pod reported unschedulable", func() bool {
		msg := d.jsonpath(t, `{.status.conditions[?(@.type=="PodScheduled")].message}`, "pod", "seed-whole-user", "-n", "mixed")
		return strings.Contains(msg, "1 allocated or locked")
	})
	if node := d.jsonpath(t, "{.spec.nodeName}", "pod", "seed-whole-user", "-n", "mixed"); node != "" {
		t.Fatalf("the 16Gi v1alpha2 pod was bound to %s although the v1 claim holds gpu-0", node)
	}
}
