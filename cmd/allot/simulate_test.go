package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/simulate"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
	resourcev1 "k8s.io/api/resource/v1"
)

func runSimulate(t *testing.T, args ...string) (string, string) {
	t.Helper()
	cmd := newSimulateCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("simulate %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

func TestSimulateSeedExample(t *testing.T) {
	seed := filepath.Join("..", "..", "examples", "manifests", "seed-002.yaml")
	out, _ := runSimulate(t, "-f", seed)
	for _, want := range []string{"kind: List", "reason: Unschedulable", `versions["runtimeVersion"] >= "v12.0.0"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	lowered := filepath.Join(t.TempDir(), "v11.yaml")
	if err := os.WriteFile(lowered, bytes.ReplaceAll(data, []byte("v12.0.0"), []byte("v11.0.0")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = runSimulate(t, "-f", lowered, "-o", "json")
	if strings.Count(out, `"id": "`) != 2 || !strings.Contains(out, `"nodeName": "worker-1"`) {
		t.Fatalf("lowered selector should fit with two instances on worker-1:\n%s", out)
	}
}

func TestSimulateNodeTemplate(t *testing.T) {
	seed := filepath.Join("..", "..", "examples", "manifests", "seed-002.yaml")
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "template.yaml")
	node := `apiVersion: v1
kind: Node
metadata: {name: big}
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1alpha2
kind: NodeResourceSlice
metadata: {name: big-cards}
spec:
  nodeName: big
  driverName: cards.dra.example.com
  partitionable:
    commonAttributes:
    - name: a
      attributes:
      - {name: runtimeVersion, version: "12.1.0"}
      - {name: memory, quantity: 16Gi}
    resourceInstances:
    - {name: gpu-0, commonAttributesRefs: [a]}
    - {name: gpu-1, commonAttributesRefs: [a]}
`
	if err := os.WriteFile(tmpl, []byte(node), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := runSimulate(t, "-f", seed, "--node-template", tmpl)
	if !strings.Contains(stderr, "new nodes needed: 1") {
		t.Fatalf("stderr = %q, want one new node", stderr)
	}
}

// equivalenceScenario: three nodes with cpu and (two of them) partitionable
// GPUs, claims asking for quarters, halves and whole cards, and pods that
// compete for cpu and for instances. Only resourceClaimName claims: the
// claim controller that turns templates into claims does not run yet.
// Then resource.k8s.io/v1: worker-c publishes two devices of the same
// driver in a ResourceSlice, a DeviceTaintRule (NoSchedule) taints one,
// and v1 claims compete with the seed claims for the seed GPUs' leaves
// (as projected devices) and for worker-c's devices.
var equivalenceScenario = `
apiVersion: v1
kind: Node
metadata: {name: worker-a, labels: {zone: a}}
status:
  conditions: [{type: Ready, status: "True"}]
  allocatable: {cpu: "4", memory: 8Gi, pods: "10"}
---
apiVersion: v1
kind: Node
metadata: {name: worker-b, labels: {zone: b}}
status:
  conditions: [{type: Ready, status: "True"}]
  allocatable: {cpu: "2", memory: 8Gi, pods: "10"}
---
apiVersion: v1
kind: Node
metadata: {name: worker-c, labels: {zone: c}}
status:
  conditions: [{type: Ready, status: "True"}]
  allocatable: {cpu: "8", memory: 8Gi, pods: "10"}
---
apiVersion: resource.k8s.io/v1alpha2
kind: NodeResourceSlice
metadata: {name: worker-a-gpus}
spec:
  nodeName: worker-a
  driverName: gpu.example.com
  partitionable:
    commonAttributes:
    - {name: full, attributes: [{name: memory, quantity: 32Gi}]}
    - {name: half, attributes: [{name: memory, quantity: 16Gi}]}
    - {name: quarter, attributes: [{name: memory, quantity: 8Gi}]}
    resourceInstances:
    - name: gpu-0
      partitions:
      - {name: full, commonAttributesRefs: [full], resourceInstances: [{name: whole}]}
      - {name: halves, commonAttributesRefs: [half], resourceInstances: [{name: half-0}, {name: half-1}]}
      - {name: quarters, commonAttributesRefs: [quarter], resourceInstances: [{name: quarter-0}, {name: quarter-1}, {name: quarter-2}, {name: quarter-3}]}
---
apiVersion: resource.k8s.io/v1alpha2
kind: NodeResourceSlice
metadata: {name: worker-b-gpus}
spec:
  nodeName: worker-b
  driverName: gpu.example.com
  partitionable:
    commonAttributes:
    - {name: full, attributes: [{name: memory, quantity: 32Gi}]}
    - {name: half, attributes: [{name: memory, quantity: 16Gi}]}
    resourceInstances:
    - name: gpu-0
      partitions:
      - {name: full, commonAttributesRefs: [full], resourceInstances: [{name: whole}]}
      - {name: halves, commonAttributesRefs: [half], resourceInstances: [{name: half-0}, {name: half-1}]}
    - name: gpu-1
      partitions:
      - {name: full, commonAttributesRefs: [full], resourceInstances: [{name: whole}]}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClass
metadata: {name: gpu}
driverName: gpu.example.com
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimParameters
metadata: {name: quarter, namespace: default}
requests:
- driverName: gpu.example.com
  partitionable:
    required: [{name: q, selector: 'quantities["memory"] == quantity("8Gi")'}]
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimParameters
metadata: {name: whole, namespace: default}
requests:
- driverName: gpu.example.com
  partitionable:
    required: [{name: w, selector: 'quantities["memory"] >= "32Gi"'}]
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimParameters
metadata: {name: two-halves, namespace: default}
requests:
- driverName: gpu.example.com
  partitionable:
    required:
    - {name: h0, selector: 'quantities["memory"] == quantity("16Gi")'}
    - {name: h1, selector: 'quantities["memory"] == quantity("16Gi")'}
` + v1Objects + claimsAndPods

var v1Objects = `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: worker-c-gpus}
spec:
  driver: gpu.example.com
  nodeName: worker-c
  pool: {name: worker-c, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: dev-0, capacity: {memory: {value: 32Gi}}}
  - {name: dev-1, capacity: {memory: {value: 32Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu-v1}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: drain-dev-1}
spec:
  deviceSelector: {driver: gpu.example.com, pool: worker-c, device: dev-1}
  taint: {key: example.com/maintenance, value: firmware, effect: NoSchedule}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: v1-whole, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu-v1
        selectors:
        - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: v1-whole2, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu-v1
        selectors:
        - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: v1-any, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu-v1, count: 2}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: v1-tolerant, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu-v1
        tolerations: [{key: example.com/maintenance, operator: Exists}]
`

var claimsAndPods = `---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: q1, namespace: default}
spec: {resourceClassName: gpu, parametersRef: {apiGroup: resource.k8s.io, kind: ResourceClaimParameters, name: quarter}}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: q2, namespace: default}
spec: {resourceClassName: gpu, parametersRef: {apiGroup: resource.k8s.io, kind: ResourceClaimParameters, name: quarter}}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: w1, namespace: default}
spec: {resourceClassName: gpu, parametersRef: {apiGroup: resource.k8s.io, kind: ResourceClaimParameters, name: whole}}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: w2, namespace: default}
spec: {resourceClassName: gpu, parametersRef: {apiGroup: resource.k8s.io, kind: ResourceClaimParameters, name: whole}}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: hh, namespace: default}
spec: {resourceClassName: gpu, parametersRef: {apiGroup: resource.k8s.io, kind: ResourceClaimParameters, name: two-halves}}
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaim
metadata: {name: w3, namespace: default}
spec: {resourceClassName: gpu, parametersRef: {apiGroup: resource.k8s.io, kind: ResourceClaimParameters, name: whole}}
` + equivalencePods

var equivalencePods = `---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: default}
spec:
  containers: [{name: app, image: busybox, resources: {requests: {cpu: "3"}}}]
` + podWith("p-q1", "q1", "1") + podWith("p-w1", "w1", "1") + podWith("p-q2", "q2", "1") +
	podWith("p-w2", "w2", "1") + podWith("p-hh", "hh", "500m") + podWith("p-w3", "w3", "1") +
	podWith("p-v1-whole", "v1-whole", "100m") + podWith("p-v1-whole2", "v1-whole2", "100m") + podWith("p-v1-any", "v1-any", "100m") + podWith("p-v1-tolerant", "v1-tolerant", "100m")

func podWith(name, claim, cpu string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: %s}]
  containers:
  - name: app
    image: busybox
    resources: {requests: {cpu: "%s"}, claims: [{name: gpu}]}
`, name, claim, cpu)
}

// placement is what the comparison looks at: every pod's node ("" when
// pending) and every claim's allocated instance IDs.
type placement struct {
	pods   map[string]string
	claims map[string]string
}

// TestSimulateMatchesLiveScheduler runs the scenario through `allot
// simulate` (in process) and through a real cluster's scheduler, creating
// the pods in file order and waiting for each to be decided, and requires
// the same nodes and the same instances.
func TestSimulateMatchesLiveScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	file := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(file, []byte(equivalenceScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := readTypedObjects([]string{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := simulate.Run(ctx, objs, simulate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim := placement{pods: map[string]string{}, claims: map[string]string{}}
	for _, p := range out.Pods {
		sim.pods[p.Name] = p.Spec.NodeName
	}
	for _, c := range out.Claims {
		sim.claims[c.Name] = instanceIDs(c)
	}
	for _, c := range out.V1Claims {
		sim.claims[c.Name] = deviceIDs(c)
	}
	// The only whole device left after v1-whole is worker-c's dev-1, which
	// the DeviceTaintRule keeps for claims that tolerate its taint.
	if sim.claims["v1-whole"] == "" || sim.pods["p-v1-whole2"] != "" || sim.claims["v1-tolerant"] != "gpu.example.com/worker-c/dev-1" {
		t.Fatalf("scenario should allocate v1-whole, keep v1-whole2 off the tainted device and give it to v1-tolerant: %v %v", sim.pods, sim.claims)
	}
	if sim.pods["p-w3"] != "" || sim.pods["p-q1"] == "" {
		t.Fatalf("scenario should place p-q1 and leave p-w3 pending: %v", sim.pods)
	}

	objs, err = readTypedObjects([]string{file}, nil) // simulate changed the pods
	if err != nil {
		t.Fatal(err)
	}
	live := runLive(ctx, t, objs)
	t.Logf("simulate: %v %v; live: %v %v", sim.pods, sim.claims, live.pods, live.claims)
	for name, want := range sim.pods {
		if got := live.pods[name]; got != want {
			t.Errorf("pod %s: simulate placed it on %q, the scheduler on %q", name, want, got)
		}
	}
	for name, want := range sim.claims {
		if got := live.claims[name]; got != want {
			t.Errorf("claim %s: simulate allocated %q, the scheduler %q", name, want, got)
		}
	}
}

// deviceIDs lists a v1 claim's allocated devices as driver/pool/device.
func deviceIDs(c *resourcev1.ResourceClaim) string {
	if c.Status.Allocation == nil {
		return ""
	}
	var ids []string
	for _, r := range c.Status.Allocation.Devices.Results {
		ids = append(ids, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

func instanceIDs(c *resourceapi.ResourceClaim) string {
	if c.Status.Allocation == nil {
		return ""
	}
	var ids []string
	for _, h := range c.Status.Allocation.ResourceHandles {
		if sd := h.StructuredData; sd != nil && sd.Partitionable != nil {
			for _, in := range sd.Partitionable.Instances {
				ids = append(ids, sd.NodeName+":"+in.ID)
			}
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

// runLive starts a cluster whose scheduler runs (no node agent), creates
// the objects, then the pods one by one, and reads back the placement.
func runLive(ctx context.Context, t *testing.T, objs []runtime.Object) placement {
	t.Helper()
	cl, err := clienttest.Start(ctx, allotBin, t.TempDir(), "--disable", "node", "--node-monitor-grace-period", "1h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	c, err := client.NewForKubeconfig(cl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
			continue
		}
		if err := createLive(ctx, c, o); err != nil {
			t.Fatalf("%v\n--- cluster log:\n%s", err, cl.Log())
		}
	}
	for _, p := range pods {
		if _, err := c.Pods(p.Namespace).Create(ctx, p); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
		if err := awaitDecision(ctx, c, p); err != nil {
			t.Fatalf("%v\n--- cluster log:\n%s", err, cl.Log())
		}
	}
	out := placement{pods: map[string]string{}, claims: map[string]string{}}
	for _, p := range pods {
		got, err := c.Pods(p.Namespace).Get(ctx, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		out.pods[p.Name] = got.Spec.NodeName
	}
	claims, err := c.ResourceClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Each version lists every claim, those stored in the other version
	// as views.
	for i := range claims.Items {
		if !resourceapi.IsView(&claims.Items[i]) {
			out.claims[claims.Items[i].Name] = instanceIDs(&claims.Items[i])
		}
	}
	v1claims, err := c.ResourceClaimsV1("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v1claims.Items {
		if !resourceapi.IsView(&v1claims.Items[i]) {
			out.claims[v1claims.Items[i].Name] = deviceIDs(&v1claims.Items[i])
		}
	}
	return out
}

// createLive creates one non-pod object; nodes get their status written
// afterwards (create ignores status).
func createLive(ctx context.Context, c *client.Client, o runtime.Object) error {
	var err error
	switch v := o.(type) {
	case *corev1.Node:
		var n *corev1.Node
		if n, err = c.Nodes().Create(ctx, v); err == nil {
			n.Status = v.Status
			_, err = c.Nodes().UpdateStatus(ctx, n)
		}
	case *resourceapi.NodeResourceSlice:
		_, err = c.NodeResourceSlices().Create(ctx, v)
	case *resourceapi.ResourceClass:
		_, err = c.ResourceClasses().Create(ctx, v)
	case *resourceapi.ResourceClaimParameters:
		_, err = c.ResourceClaimParameters(v.Namespace).Create(ctx, v)
	case *resourceapi.ResourceClaim:
		_, err = c.ResourceClaims(v.Namespace).Create(ctx, v)
	case *resourcev1.ResourceSlice:
		_, err = c.ResourceSlices().Create(ctx, v)
	case *resourcev1.DeviceClass:
		_, err = c.DeviceClasses().Create(ctx, v)
	case *resourcev1.DeviceTaintRule:
		_, err = c.DeviceTaintRules().Create(ctx, v)
	case *resourcev1.ResourceClaim:
		_, err = c.ResourceClaimsV1(v.Namespace).Create(ctx, v)
	default:
		err = fmt.Errorf("unexpected %T", o)
	}
	if err != nil {
		return fmt.Errorf("create %T: %w", o, err)
	}
	return nil
}

// awaitDecision waits until the pod is bound or marked unschedulable.
func awaitDecision(ctx context.Context, c *client.Client, p *corev1.Pod) error {
	var last *corev1.Pod
	for ctx.Err() == nil {
		got, err := c.Pods(p.Namespace).Get(ctx, p.Name)
		if err == nil {
			last = got
			if got.Spec.NodeName != "" {
				return nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
					return nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("pod %s was not decided: %+v", p.Name, last)
}

// simulate reads v1 objects mixed with seed ones and DeviceTaintRules, and
// prints v1 claims as v1 claims with their allocations; the pod whose
// claim does not tolerate the rule's taint stays pending, the taint named;
// stderr lists the taints the rules put on devices.
func TestSimulateV1AndTaintRules(t *testing.T) {
	out, stderr := runSimulate(t, "-f", filepath.Join("..", "..", "examples", "simulate", "v1-and-taints.yaml"))
	// What the rules did, None included, on stderr.
	if want := "device taint: gpu.example.com/worker-2/dev-0: example.com/note=inventory:None (DeviceTaintRule note)\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	for _, want := range []string{
		"apiVersion: resource.k8s.io/v1\n",
		"device: gpu-1\n", // p1's v1 claim on worker-1's seed GPU
		"device: dev-0\n", // the tolerant claim on worker-2
		"pool: worker-2\n",
		"apiVersion: resource.k8s.io/v1alpha2", // the seed claim stays seed
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	objs, err := readTypedObjects([]string{filepath.Join("..", "..", "examples", "simulate", "v1-and-taints.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := simulate.Run(context.Background(), objs, simulate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Pods {
		if want := map[string]bool{"s1": true, "p1": true, "p2": false, "p3": true}[p.Name]; (p.Spec.NodeName != "") != want {
			t.Errorf("pod %s on %q", p.Name, p.Spec.NodeName)
		}
		if p.Name == "p2" {
			i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
			if taint := "example.com/maintenance=firmware:NoSchedule on worker-2/dev-0"; i < 0 || !strings.Contains(p.Status.Conditions[i].Message, taint) {
				t.Errorf("p2's condition does not name the taint %q: %+v", taint, p.Status.Conditions)
			}
		}
	}
}
