package dynamicresources_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// The tests of answer reuse for pods with resource.k8s.io/v1 claims
// that PreFilter, Filter and Reserve decide (R5, R10-R12 in reuse.go).

const devDriver = "dev.example.com"

// devSlice is node's v1 slice: pool <node>, local to it, with a
// shareable device nic (bandwidth 100G) and two devices gpu-0, gpu-1.
func devSlice(node string) *resourcev1.ResourceSlice {
	nic := resourcev1.Device{Name: "nic", AllowMultipleAllocations: ptr(true),
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"bandwidth": {Value: resource.MustParse("100G")}}}
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devs"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: devDriver, NodeName: ptr(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{nic, {Name: "gpu-0"}, {Name: "gpu-1"}}}}
	return s
}

// devClass is DeviceClass dev at resourceVersion 3 (a signature needs
// versioned classes): every device of the driver.
func devClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "dev", ResourceVersion: "3"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + devDriver + `"`}}}}}
}

// devClaim is a claim of one shape under any name, as a template makes
// them: a 10G share of the nic and gpus GPUs, and a config that names
// the claim.
func devClaim(name string, gpus int64) *resourcev1.ResourceClaim {
	nic := resourcev1.DeviceRequest{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dev",
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.allowMultipleAllocations == true`}}},
		Capacity:  &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse("10G")}}}}
	gpu := resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dev", Count: gpus,
		AllocationMode: resourcev1.DeviceAllocationModeExactCount,
		Selectors:      []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.allowMultipleAllocations == false`}}}}}
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "5"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{nic, gpu},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: devDriver, Parameters: runtime.RawExtension{Raw: []byte(`{"claim":"` + name + `"}`)}}}}}}}}
}

// devLists: nodes' devSlices, devClass, the v1 claims.
func devLists(nodes []string, claims ...*resourcev1.ResourceClaim) dynamicresources.Lists {
	l := dynamicresources.Lists{DeviceClasses: []*resourcev1.DeviceClass{devClass()}, V1Claims: claims, Revision: "7"}
	for _, n := range nodes {
		l.V1Slices = append(l.V1Slices, devSlice(n))
	}
	return l
}

// devScheduler runs whole cycles of p over three nodes n1..n3.
type devScheduler struct {
	t     *testing.T
	p     *dynamicresources.DynamicResources
	f     *framework.Framework
	nodes *framework.Snapshot
}

func newDevScheduler(t *testing.T, p *dynamicresources.DynamicResources) *devScheduler {
	f, err := framework.New([]framework.Plugin{p}, framework.Options{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ns []*corev1.Node
	for _, n := range []string{"n1", "n2", "n3"} {
		ns = append(ns, schedtest.MakeNode(n).Obj())
	}
	return &devScheduler{t: t, p: p, f: f, nodes: framework.NewSnapshot(ns, nil)}
}

// run schedules pod on objs, reserves it on the node chosen when
// reserve is set, and returns the cycle's state and outcome.
func (d *devScheduler) run(objs *dynamicresources.Objects, pod *corev1.Pod, reserve bool) (*framework.CycleState, *framework.Diagnosis) {
	d.t.Helper()
	state := framework.NewCycleState()
	diag := d.f.Schedule(context.Background(), state, d.nodes.WithExtension(dynamicresources.Name, objs), pod)
	if reserve {
		if !diag.Status.IsSuccess() {
			d.t.Fatalf("%s: %s", pod.Name, diag.Message())
		}
		if st := d.p.Reserve(context.Background(), state, pod, diag.Selected); !st.IsSuccess() {
			d.t.Fatalf("reserve %s: %s", pod.Name, st.Message())
		}
	}
	return state, diag
}

// TestReusedV1AnswersAreTheCyclesOwn (R12): the second pod of a
// template takes the first one's answers on every node, and what it
// gets is its own: the claims Reserve binds are those a plugin without
// earlier answers gives it (its claim's config, its share IDs), and a
// node's rejection names its claim.
func TestReusedV1AnswersAreTheCyclesOwn(t *testing.T) {
	objs := dynamicresources.NewObjects(devLists([]string{"n1", "n2", "n3"}, devClaim("a", 1), devClaim("b", 1), devClaim("x", 3), devClaim("y", 3)))
	d := newDevScheduler(t, dynamicresources.NewCountingReuse())
	d.run(objs, podUsing("pod-a", "a"), false)
	if got := d.p.ReusedChecks(); got != 0 {
		t.Fatalf("first pod: %d reused answers", got)
	}
	state, diag := d.run(objs, podUsing("pod-b", "b"), true)
	if got := d.p.ReusedChecks(); got != 3 {
		t.Fatalf("second pod of the template: %d reused answers, want 3 (every node)", got)
	}
	fresh := newDevScheduler(t, dynamicresources.New())
	freshState, freshDiag := fresh.run(objs, podUsing("pod-b", "b"), true)
	if diag.Selected != freshDiag.Selected {
		t.Fatalf("chose %s, without reuse %s", diag.Selected, freshDiag.Selected)
	}
	got, want := dynamicresources.BoundClaimsV1(state), dynamicresources.BoundClaimsV1(freshState)
	if len(got) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("claims bound from a reused answer:\n%+v\nwithout reuse:\n%+v", got, want)
	}
	if cfg := string(got[0].Status.Allocation.Devices.Config[0].Opaque.Parameters.Raw); !strings.Contains(cfg, `"b"`) {
		t.Fatalf("claim b allocated with config %s, want its own", cfg)
	}
	if r := dynamicresources.ResultV1(state, "n2"); r == nil || !reflect.DeepEqual(r.Allocations, dynamicresources.ResultV1(freshState, "n2").Allocations) {
		t.Fatalf("ResultV1 of a reused answer: %+v, want pod-b's own", r)
	}

	// Three GPUs fit nowhere: pod-y's reasons name its claim (on the
	// two nodes without pod-b in flight, from pod-x's answers).
	before := d.p.ReusedChecks()
	d.run(objs, podUsing("pod-x", "x"), false)
	_, diag = d.run(objs, podUsing("pod-y", "y"), false)
	if got := d.p.ReusedChecks() - before; got != 2 {
		t.Fatalf("pod-y: %d reused answers, want 2", got)
	}
	if msg := diag.Message(); !strings.Contains(msg, "claim default/y") || strings.Contains(msg, "default/x") {
		t.Fatalf("pod-y's rejection %q, want its own claim named", msg)
	}
}

// TestReuseSkipsNodesWithV1PodsInFlight (R5 through PreFilter): a pod
// reserved in memory on a node (its v1 claims not in the Objects yet)
// makes the next pod judge that node again, and take the others'
// answers.
func TestReuseSkipsNodesWithV1PodsInFlight(t *testing.T) {
	objs := dynamicresources.NewObjects(devLists([]string{"n1", "n2", "n3"}, devClaim("a", 1), devClaim("b", 1), devClaim("c", 1)))
	d := newDevScheduler(t, dynamicresources.NewCountingReuse())
	_, diag := d.run(objs, podUsing("pod-a", "a"), true)
	d.run(objs, podUsing("pod-b", "b"), false)
	if got := d.p.ReusedChecks(); got != 2 {
		t.Fatalf("with pod-a in flight on %s: %d reused answers, want 2 (the other nodes)", diag.Selected, got)
	}
}

// TestReuseNeedsSignaturesOfBothVersions (R10): a pod with v1 claims
// reuses when its v1 request has a signature and, if it has v1alpha2
// claims too, so do they.
func TestReuseNeedsSignaturesOfBothVersions(t *testing.T) {
	l := mixedLists(t, []*resourceapi.ResourceClaim{claim("a", "small")}, v1Claim("v1-b"), v1Claim("v1-c"))
	versioned := func(seed, v1 bool) dynamicresources.Lists {
		l := l
		l.Classes = []*resourceapi.ResourceClass{class("")}
		l.DeviceClasses = []*resourcev1.DeviceClass{gpuV1Class()}
		if seed {
			l.Classes[0].ResourceVersion = "3"
		}
		if v1 {
			l.DeviceClasses[0].ResourceVersion = "3"
		}
		return l
	}
	allocated := v1Claim("v1-c")
	allocated.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driver, Pool: "n1", Device: "gpu-1"}}}}
	allocated.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "v1-allocated", UID: "uid-v1-allocated"}}
	withAllocated := versioned(true, true)
	withAllocated.V1Claims = []*resourcev1.ResourceClaim{v1Claim("v1-b"), allocated}
	for _, tc := range []struct {
		name  string
		l     dynamicresources.Lists
		pod   *corev1.Pod
		reuse bool
	}{
		{"v1 claim, versioned class", versioned(false, true), podUsing("v1", "v1-b"), true},
		{"claims of both versions, versioned classes", versioned(true, true), podUsing("mixed", "a", "v1-b"), true},
		{"v1 claim, class without a resourceVersion", versioned(true, false), podUsing("v1", "v1-b"), false},
		{"claims of both versions, v1alpha2 class without a resourceVersion", versioned(false, true), podUsing("mixed", "a", "v1-b"), false},
		{"claims of both versions, DeviceClass without a resourceVersion", versioned(true, false), podUsing("mixed", "a", "v1-b"), false},
		{"an allocated v1 claim", withAllocated, podUsing("v1-allocated", "v1-b", "v1-c"), false},
	} {
		state := framework.NewCycleState()
		if st := dynamicresources.New().PreFilter(context.Background(), state, tc.pod, snapshotOf(tc.l, "n1")); !st.IsSuccess() {
			t.Fatalf("%s: PreFilter = %v", tc.name, st.Message())
		}
		if got := dynamicresources.Reuses(state); got != tc.reuse {
			t.Errorf("R10: %s: reuses = %v, want %v", tc.name, got, tc.reuse)
		}
	}
}

// TestReuseNeedsNoExtendedResources (R11): a pod asking for an extended
// resource that a DeviceClass maps reuses nothing, even with a v1 claim
// of a signature: the claims it is judged with differ per node.
func TestReuseNeedsNoExtendedResources(t *testing.T) {
	l := devLists([]string{"n1"}, devClaim("a", 1))
	name := "example.com/dev"
	l.DeviceClasses[0].Spec.ExtendedResourceName = &name
	plain := podUsing("plain", "a")
	state := framework.NewCycleState()
	if st := dynamicresources.New().PreFilter(context.Background(), state, plain, snapshotOf(l, "n1")); !st.IsSuccess() || !dynamicresources.Reuses(state) {
		t.Fatalf("a v1 claim's cycle does not reuse (%v): the case below proves nothing", st.Message())
	}
	ext := podUsing("ext", "a")
	ext.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceName(name): resource.MustParse("1")}}}}
	state = framework.NewCycleState()
	if st := dynamicresources.New().PreFilter(context.Background(), state, ext, snapshotOf(l, "n1")); !st.IsSuccess() {
		t.Fatalf("PreFilter = %v", st.Message())
	}
	if dynamicresources.Reuses(state) {
		t.Error("R11: a pod whose extended resources DRA may serve reuses answers")
	}
}
