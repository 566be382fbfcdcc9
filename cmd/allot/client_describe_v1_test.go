package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// resource.k8s.io/v1 objects; %[1]s is the namespace, %[2]s the prefix of
// the cluster-scoped names.
const v1DescribeFixture = `apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: %[2]s-gpu
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
  config:
  - opaque:
      driver: gpu.example.com
      parameters: {sharing: time-sliced}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: %[2]s-n1-gpus
spec:
  driver: gpu.example.com
  nodeName: %[2]s-n1
  pool: {name: %[2]s-n1, generation: 3, resourceSliceCount: 2}
  devices:
  - name: gpu-0
    attributes:
      model: {string: A100}
      index: {int: 0}
      driverVersion: {version: 1.2.3}
    capacity:
      memory: {value: 40Gi}
    consumesCounters:
    - counterSet: gpu-0-mem
      counters: {memory: {value: 40Gi}}
    taints:
    - {key: maintenance, value: planned, effect: NoSchedule}
  - name: gpu-1
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: %[2]s-n1-counters
spec:
  driver: gpu.example.com
  nodeName: %[2]s-n1
  pool: {name: %[2]s-n1, generation: 3, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-mem
    counters: {memory: {value: 40Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: gpus
  namespace: %[1]s
spec:
  devices:
    requests:
    - name: big
      exactly:
        deviceClassName: %[2]s-gpu
        allocationMode: ExactCount
        count: 2
        selectors:
        - cel: {expression: 'device.attributes["gpu.example.com"].model == "A100"'}
    - name: any
      firstAvailable:
      - name: large
        deviceClassName: %[2]s-gpu
        selectors:
        - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
      - name: all
        deviceClassName: %[2]s-gpu
        allocationMode: All
    constraints:
    - requests: [big]
      matchAttribute: gpu.example.com/model
    config:
    - requests: [big]
      opaque:
        driver: gpu.example.com
        parameters: {mode: exclusive}
`

// describe shows resource.k8s.io/v1 claims, slices and classes field by
// field: a claim's requests, state, devices and consumers; a slice's pool,
// devices and counters; a class's selectors and config.
func TestDescribeResourceV1(t *testing.T) {
	ns := uniqueName("describe-v1")
	allot(t, "apply", "-f", writeManifest(t, "v1.yaml", fmt.Sprintf(v1DescribeFixture, ns, ns)))

	claim := allot(t, "describe", "resourceclaim", "gpus", "-n", ns)
	assertLines(t, "pending v1 claim", claim,
		"API Version:  resource.k8s.io/v1\n",
		"Requests:\n  big:\n    Device Class:  "+ns+"-gpu\n    Allocation:    ExactCount 2\n    Selectors:\n",
		`- cel:  device.attributes["gpu.example.com"].model == "A100"`,
		"  any:\n    First Available:\n      large:\n        Device Class:  "+ns+"-gpu\n        Allocation:    ExactCount 1\n",
		"      all:\n        Device Class:  "+ns+"-gpu\n        Allocation:    All\n        Selectors:     <none>\n",
		"Constraints:\n  - match attribute gpu.example.com/model  among big\n",
		"Config:\n  - Requests:    big\n    Driver:      gpu.example.com\n    Parameters:  {\"mode\":\"exclusive\"}\n",
		"State:          pending\n", "Allocation:     <none>\n", "Reserved For:   <none>\n", "Device Status:  <none>\n",
		"Events:",
	)

	// Allocate it as the scheduler would (one pods/binding write that
	// allocates and reserves), then report a device's status as a driver
	// would.
	c, ctx := newTestClient(t), testCtx(t)
	node := ns + "-n1"
	if _, err := c.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	claimName := "gpus"
	pod, err := c.Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns}, Spec: corev1.PodSpec{
		SchedulerName:  "nobody",
		Containers:     []corev1.Container{{Name: "c", Image: "busybox"}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: &claimName}},
	}})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	alloc := &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "big", Driver: "gpu.example.com", Pool: ns + "-n1", Device: "gpu-0"},
				{Request: "big", Driver: "gpu.example.com", Pool: ns + "-n1", Device: "gpu-1"},
				{Request: "any/large", Driver: "gpu.example.com", Pool: ns + "-n1", Device: "gpu-0", AdminAccess: ptr.To(true)},
			},
			Config: []resourcev1.DeviceAllocationConfiguration{{
				Source: resourcev1.AllocationConfigSourceClass,
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"sharing":"time-sliced"}`)}}},
			}},
		},
		NodeSelector: nodeSelectorFor(node),
	}
	raw, err := json.Marshal(alloc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bind(ctx, ns, pod.Name, &corev1.Binding{
		ObjectMeta:       metav1.ObjectMeta{Name: pod.Name},
		Target:           corev1.ObjectReference{Kind: "Node", Name: node},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: claimName, Allocation: &runtime.RawExtension{Raw: raw}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: node, DriverName: "gpu.example.com", Revision: pod.ResourceVersion}},
	}); err != nil {
		t.Fatalf("bind pod: %v", err)
	}
	rc, err := c.ResourceClaimsV1(ns).Get(ctx, claimName)
	if err != nil {
		t.Fatalf("get claim: %v", err)
	}
	rc.Status.Devices = []resourcev1.AllocatedDeviceStatus{{
		Driver: "gpu.example.com", Pool: ns + "-n1", Device: "gpu-0",
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared",
			LastTransitionTime: metav1.Now()}},
		NetworkData: &resourcev1.NetworkDeviceData{InterfaceName: "eth1", IPs: []string{"10.0.0.5/24"}},
	}}
	if _, err := c.ResourceClaimsV1(ns).UpdateStatus(ctx, rc); err != nil {
		t.Fatalf("update claim status: %v", err)
	}
	recordClaimEvent(t, c, ns)
	claim = allot(t, "describe", "resourceclaim", "gpus", "-n", ns)
	assertLines(t, "allocated v1 claim", claim,
		"State:          allocated,reserved\n",
		"Allocation:\n  Node Selector:  metadata.name In ["+node+"]\n  Devices:\n",
		"Request    Driver           Pool",
		"big        gpu.example.com  "+ns+"-n1  gpu-0   false\n",
		"big        gpu.example.com  "+ns+"-n1  gpu-1   false\n",
		"any/large  gpu.example.com  "+ns+"-n1  gpu-0   true\n",
		"  Config:\n    - Source:      FromClass\n      Requests:    all\n      Driver:      gpu.example.com\n",
		"Reserved For:\n  Resource  Name     UID\n  --------  ----     ---\n  pods      trainer  "+string(pod.UID)+"\n",
		"Device Status:\n  gpu.example.com/"+ns+"-n1/gpu-0:\n    Conditions:  Ready=True (Prepared)\n    Interface:   eth1\n    IPs:         10.0.0.5/24\n",
		"Normal  Allocated", "allocated 2 devices",
	)

	slice := allot(t, "describe", "resourceslice", ns+"-n1-gpus")
	assertLines(t, "slice", slice,
		"Driver:           gpu.example.com\n",
		"Pool:\n  Name:         "+ns+"-n1\n  Generation:   3\n  Slice Count:  2\n",
		"Nodes:  node "+node+"\n", "Shared Counters:  <none>\n",
		"Devices:\n  gpu-0:\n    Attributes:\n",
		"      driverVersion:  version 1.2.3\n      index:          0\n      model:          \"A100\"\n",
		"    Capacity:\n      memory:  40Gi\n",
		"    Consumes Counters:\n      gpu-0-mem:  memory=40Gi\n",
		"    Taints:  maintenance=planned:NoSchedule\n",
		"  gpu-1:\n",
	)

	counters := allot(t, "describe", "resourceslice", ns+"-n1-counters")
	assertLines(t, "counter slice", counters,
		"Shared Counters:\n  gpu-0-mem:  memory=40Gi\n")
	assertLines(t, "counter slice", counters, "Devices:  <none>\n")

	class := allot(t, "describe", "deviceclass", ns+"-gpu")
	assertLines(t, "class", class,
		"Selectors:\n  - cel:  device.driver == \"gpu.example.com\"\n",
		"Config:\n  - Driver:      gpu.example.com\n    Parameters:  {\"sharing\":\"time-sliced\"}\n",
	)
}

// columnGaps are runs of spaces after text: the tab writer's padding.
var columnGaps = regexp.MustCompile(`(\S)  +`)

func nodeSelectorFor(node string) *k8scorev1.NodeSelector {
	return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchFields: []k8scorev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: "In", Values: []string{node}}}}}}
}

// recordClaimEvent records a Normal event about the claim, as the
// allocator would.
func recordClaimEvent(t *testing.T, c *client.Client, ns string) {
	t.Helper()
	ctx := testCtx(t)
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "gpus.allocated", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim", Namespace: ns, Name: "gpus"},
		Type:           corev1.EventTypeNormal, Reason: "Allocated", Message: "allocated 2 devices",
		Source: corev1.EventSource{Component: "test"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
	if _, err := c.Events(ns).Create(ctx, e); err != nil {
		t.Fatalf("create event: %v", err)
	}
}

// assertLines fails unless out contains every one of want, alike but for
// the width of the gaps between columns (the tab writer's alignment).
func assertLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(columnGaps.ReplaceAllString(out, "$1 "), columnGaps.ReplaceAllString(w, "$1 ")) {
			t.Fatalf("%s: description lacks %q:\n%s", what, w, out)
		}
	}
}
