package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/dra"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/queue"
	"allot.dev/allot/pkg/client"
)

// fakeDRA is the store behind the DRA extension (dra.Extension) of a scheduler over a
// fakeCluster: changes go to the store and through the scheduler's
// forwarding handlers, as informer events would.
type fakeDRA struct {
	claims, slices, classes, classParams, claimParams, contexts toolscache.Indexer
}

// withDRA is a setup for start: the scheduler's DRA extension reads a
// fakeDRA.
func withDRA(f *fakeCluster) {
	idx := func() toolscache.Indexer {
		return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	}
	claims := idx()
	if err := claims.AddIndexers(dra.ClaimIndexers); err != nil {
		panic(err)
	}
	d := &fakeDRA{claims: claims, slices: idx(), classes: idx(), classParams: idx(), claimParams: idx(), contexts: idx()}
	f.dra = d
	l := dra.Listers{
		Claims:          client.NewLister[*resourceapi.ResourceClaim](d.claims, resourceapi.Resource("resourceclaims")),
		Slices:          client.NewLister[*resourceapi.NodeResourceSlice](d.slices, resourceapi.Resource("noderesourceslices")),
		Classes:         client.NewLister[*resourceapi.ResourceClass](d.classes, resourceapi.Resource("resourceclasses")),
		ClassParameters: client.NewLister[*resourceapi.ResourceClassParameters](d.classParams, resourceapi.Resource("resourceclassparameters")),
		ClaimParameters: client.NewLister[*resourceapi.ResourceClaimParameters](d.claimParams, resourceapi.Resource("resourceclaimparameters")),
		Contexts:        client.NewLister[*resourceapi.PodSchedulingContext](d.contexts, resourceapi.Resource("podschedulingcontexts")),
	}
	for _, e := range f.s.exts.all {
		if x, ok := e.(*dra.Extension); ok {
			x.UseListers(l)
			return
		}
	}
	panic("withDRA: the scheduler has no DRA extension")
}

func (d *fakeDRA) target(obj runtime.Object) (toolscache.Indexer, framework.EventResource) {
	switch obj.(type) {
	case *resourceapi.ResourceClaim:
		return d.claims, framework.ResourceClaim
	case *resourceapi.NodeResourceSlice:
		return d.slices, framework.NodeResourceSlice
	case *resourceapi.ResourceClass:
		return d.classes, framework.ResourceClass
	case *resourceapi.ResourceClassParameters:
		return d.classParams, framework.ResourceClassParams
	case *resourceapi.ResourceClaimParameters:
		return d.claimParams, framework.ResourceClaimParams
	}
	panic("fakeDRA: unexpected object")
}

func (d *fakeDRA) add(t *testing.T, s *Scheduler, objs ...runtime.Object) {
	t.Helper()
	for _, obj := range objs {
		idx, res := d.target(obj)
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
		s.forward(res).OnAdd(obj, false)
	}
}

func (d *fakeDRA) update(t *testing.T, s *Scheduler, old, obj runtime.Object) {
	t.Helper()
	idx, res := d.target(obj)
	if err := idx.Update(obj); err != nil {
		t.Fatal(err)
	}
	s.forward(res).OnUpdate(old, obj)
}

func (d *fakeDRA) updateClaim(s *Scheduler, old, c *resourceapi.ResourceClaim) {
	_ = d.claims.Update(c)
	s.forward(framework.ResourceClaim).OnUpdate(old, c)
}

func (d *fakeDRA) claim(ns, name string) (*resourceapi.ResourceClaim, bool) {
	obj, ok, _ := d.claims.GetByKey(ns + "/" + name)
	if !ok {
		return nil, false
	}
	return obj.(*resourceapi.ResourceClaim), true
}

const testDriver = "gpu.example.com"

// gpuSlice: node's GPUs, one instance per memory size given.
func gpuSlice(t *testing.T, node string, memory ...string) *resourceapi.NodeResourceSlice {
	t.Helper()
	doc := `
metadata: {name: "` + node + `-gpus"}
spec:
  nodeName: "` + node + `"
  driverName: ` + testDriver + `
  partitionable:
    resourceInstances:
`
	for i, m := range memory {
		doc += "    - {name: gpu-" + string(rune('0'+i)) + ", attributes: [{name: memory, quantity: " + m + "}]}\n"
	}
	s := &resourceapi.NodeResourceSlice{}
	if err := yaml.UnmarshalStrict([]byte(doc), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// draWorld: class "gpu", and claim parameters "small" (>= 8Gi) and "huge"
// (>= 64Gi) in namespace default.
func draWorld() []runtime.Object {
	params := func(name, selector string) *resourceapi.ResourceClaimParameters {
		return &resourceapi.ResourceClaimParameters{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Requests: []resourceapi.ResourceRequest{{DriverName: testDriver, ResourceRequestModel: resourceapi.ResourceRequestModel{
				Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{{Name: "one", Selector: selector}}},
			}}},
		}
	}
	return []runtime.Object{
		&resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, DriverName: testDriver},
		params("small", `quantities["memory"] >= "8Gi"`),
		params("huge", `quantities["memory"] >= "64Gi"`),
	}
}

func newClaim(name, params string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "1"},
		Spec: resourceapi.ResourceClaimSpec{ResourceClassName: "gpu", ParametersRef: &resourceapi.ResourceClaimParametersReference{
			APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: params,
		}},
	}
}

// claimState says where a claim is allocated and for whom it is reserved.
func (f *fakeCluster) claimState(name string) (node string, reservedFor []string) {
	c, ok := f.dra.claim("default", name)
	if !ok {
		return "", nil
	}
	if a := c.Status.Allocation; a != nil && len(a.ResourceHandles) > 0 && a.ResourceHandles[0].StructuredData != nil {
		node = a.ResourceHandles[0].StructuredData.NodeName
	}
	for _, r := range c.Status.ReservedFor {
		reservedFor = append(reservedFor, r.Name)
	}
	return node, reservedFor
}

func (f *fakeCluster) waitReserved(t *testing.T, claim, node, pod string) {
	t.Helper()
	eventually(t, "claim "+claim+" allocated on "+node+" and reserved for "+pod, func() bool {
		n, r := f.claimState(claim)
		return n == node && len(r) == 1 && r[0] == pod
	})
}

func (f *fakeCluster) hasEvent(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func (f *fakeCluster) claimCycles(t *testing.T) (allocated, unschedulable, errored float64) {
	m := f.s.metrics.claimCycles
	return counterValue(t, m.WithLabelValues(ResultAllocated)), counterValue(t, m.WithLabelValues(ResultUnschedulable)),
		counterValue(t, m.WithLabelValues(ResultError))
}

// A pod created on a node whose cpu it overcommits gets its claim
// allocated there and reserved for it through a binding to that node;
// PodScheduled is not touched and later updates cause no new cycle.
func TestClaimCycleAllocatesOnThePodsNode(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "1").Obj())
	f.s.onNodeAdd(makeNode("roomy").Alloc("cpu", "64").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"), gpuSlice(t, "roomy", "8Gi"), newClaim("c", "small"))
	f.addPod(makePod("p").Req("cpu", "4").Node("n").Claim("gpu", "c").Obj())
	f.waitReserved(t, "c", "n", "p")
	eventually(t, "the pod to leave the queue", func() bool { return f.s.queue.Where("default/p") == queue.Absent })
	f.mu.Lock()
	b := f.bindings["p"]
	f.mu.Unlock()
	if b.Target.Name != "n" || len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Allocation == nil || len(b.AllocationFences) != 1 {
		t.Fatalf("binding = %+v", b)
	}
	if !f.hasEvent("AllocatedResourceClaims: Allocated and reserved resource claims c on n") {
		t.Errorf("events = %v", f.events)
	}
	pod := f.pod("p")
	if c := PodScheduledCondition(pod); c != nil {
		t.Errorf("PodScheduled was written: %+v", c)
	}
	if c := ClaimsAllocatedCondition(pod); c != nil {
		t.Errorf("a first attempt that succeeded wrote %+v", c)
	}
	// The node agent reports the pod: its claims are ready, no new cycle.
	f.updatePodStatus("p", func(st *corev1.PodStatus) { st.Phase = corev1.PodRunning })
	if w := f.s.queue.Where("default/p"); w != queue.Absent {
		t.Fatalf("a pod with ready claims was queued (%s)", w)
	}
	if a, u, e := f.claimCycles(t); a != 1 || u != 0 || e != 0 {
		t.Fatalf("claim cycles allocated=%v unschedulable=%v error=%v", a, u, e)
	}
	if got := counterValue(t, f.s.metrics.attempts.WithLabelValues(ResultScheduled)); got != 0 {
		t.Fatalf("scheduling attempts = %v", got)
	}
}

// A claim that fits nowhere on the pod's node: the condition and the
// event quote the selector clause; a slice update moves the pod (the
// safety net is an hour) and the condition turns True.
func TestClaimCycleRecordsWhyThenAllocates(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	small := gpuSlice(t, "n", "8Gi")
	f.dra.add(t, f.s, small, newClaim("c", "huge"))
	f.addPod(makePod("p").Node("n").Claim("gpu", "c").Obj())
	var msg string
	eventually(t, "ResourceClaimsAllocated=False", func() bool {
		c := ClaimsAllocatedCondition(f.pod("p"))
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonUnallocatable {
			return false
		}
		msg = c.Message
		return true
	})
	if !strings.HasPrefix(msg, "0/1 nodes are available: 1 claim default/c") || !strings.Contains(msg, `quantities["memory"] >= "64Gi"`) {
		t.Fatalf("message %q does not quote the clause", msg)
	}
	eventually(t, "the pod to be parked", func() bool { return f.s.queue.Where("default/p") == queue.Unschedulable })
	if !f.hasEvent("FailedResourceClaimAllocation: " + msg) {
		t.Fatalf("events = %v", f.events)
	}
	f.dra.update(t, f.s, small, gpuSlice(t, "n", "8Gi", "64Gi"))
	f.waitReserved(t, "c", "n", "p")
	eventually(t, "ResourceClaimsAllocated=True", func() bool {
		c := ClaimsAllocatedCondition(f.pod("p"))
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == ReasonAllocated
	})
	if c := PodScheduledCondition(f.pod("p")); c != nil {
		t.Errorf("PodScheduled was written: %+v", c)
	}
	if a, u, e := f.claimCycles(t); a != 1 || u != 1 || e != 0 {
		t.Fatalf("claim cycles allocated=%v unschedulable=%v error=%v", a, u, e)
	}
}

// A pod bound by a normal cycle has its claims reserved by that binding:
// even while the claim informer lags the pod informer (the pod shows
// bound, with status updates, before its claims do), it gets no claim
// cycle and no second binding.
func TestNormalBindingCausesNoClaimCycle(t *testing.T) {
	f := start(t, Config{}, withDRA, func(f *fakeCluster) { f.lagClaims = true })
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"), newClaim("c", "small"))
	f.addPod(makePod("p").Claim("gpu", "c").Obj())
	f.waitNode(t, "p")
	eventually(t, "the Scheduled event", func() bool { return f.hasEvent("Scheduled: ") })
	eventually(t, "the pod to leave the queue", func() bool { return f.s.queue.Where("default/p") == queue.Absent })
	if n, _ := f.claimState("c"); n != "" {
		t.Fatal("the claim informer was not held back")
	}
	f.updatePodStatus("p", func(st *corev1.PodStatus) { st.Phase = corev1.PodPending; st.Reason = "WaitingForResourceClaim" })
	if w := f.s.queue.Where("default/p"); w != queue.Absent {
		t.Fatalf("the pod was queued for a claim cycle (%s)", w)
	}
	f.publishClaims()
	f.waitReserved(t, "c", "n", "p")
	f.updatePodStatus("p", func(st *corev1.PodStatus) { st.Phase = corev1.PodRunning; st.Reason = "" })
	if w := f.s.queue.Where("default/p"); w != queue.Absent {
		t.Fatalf("the pod was queued for a claim cycle (%s)", w)
	}
	if a, u, e := f.claimCycles(t); a+u+e != 0 {
		t.Fatalf("claim cycles allocated=%v unschedulable=%v error=%v", a, u, e)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.binds != 1 {
		t.Fatalf("%d bindings, want 1", f.binds)
	}
}

// A hand-placed pod whose template claim is not recorded yet waits
// (condition False); the claim controller's status update moves it.
func TestClaimCycleWaitsForTemplateClaim(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"))
	f.addPod(makePod("p").Node("n").ClaimTemplate("gpu", "t").Obj())
	want := "waiting for the resource claim of entry gpu (template t) to be created"
	eventually(t, "the wait to be recorded", func() bool {
		c := ClaimsAllocatedCondition(f.pod("p"))
		return c != nil && c.Status == corev1.ConditionFalse && c.Message == want
	})
	eventually(t, "the pod to be parked", func() bool { return f.s.queue.Where("default/p") == queue.Unschedulable })
	f.dra.add(t, f.s, newClaim("p-gpu", "small"))
	name := "p-gpu"
	f.updatePodStatus("p", func(st *corev1.PodStatus) {
		st.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	})
	f.waitReserved(t, "p-gpu", "n", "p")
	eventually(t, "ResourceClaimsAllocated=True", func() bool {
		c := ClaimsAllocatedCondition(f.pod("p"))
		return c != nil && c.Status == corev1.ConditionTrue
	})
}

// A claim already allocated and in use by another pod: the second
// hand-placed pod waits; once the first pod's reservation is removed, the
// claim is reserved for it without a new allocation.
func TestClaimCycleReservesAllocatedClaim(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"), newClaim("c", "small"))
	f.addPod(makePod("first").Node("n").Claim("gpu", "c").Obj())
	f.waitReserved(t, "c", "n", "first")
	f.addPod(makePod("second").Node("n").Claim("gpu", "c").Obj())
	eventually(t, "second to be refused", func() bool {
		c := ClaimsAllocatedCondition(f.pod("second"))
		return c != nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "in use by pods/first")
	})
	old, _ := f.dra.claim("default", "c")
	released := old.DeepCopy()
	released.Status.ReservedFor = nil
	released.ResourceVersion = "1000"
	f.dra.update(t, f.s, old, released)
	f.waitReserved(t, "c", "n", "second")
	f.mu.Lock()
	b := f.bindings["second"]
	f.mu.Unlock()
	if len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Allocation != nil || len(b.AllocationFences) != 0 {
		t.Fatalf("binding = %+v, want a reservation without allocation", b)
	}
}

// A claim binding that fails after the pod changed meanwhile (the node
// agent reported it) is retried: the reservation in flight does not count
// as ready until its binding is committed.
func TestFailedClaimBindingIsRetried(t *testing.T) {
	f := start(t, Config{}, withDRA)
	var calls atomic.Int32
	f.bindHook = func(context.Context, string) error {
		if calls.Add(1) > 1 {
			return nil
		}
		f.updatePodStatus("p", func(st *corev1.PodStatus) { st.Phase = corev1.PodPending; st.Reason = "WaitingForResourceClaim" })
		return errors.New("connection reset")
	}
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"), newClaim("c", "small"))
	f.addPod(makePod("p").Node("n").Claim("gpu", "c").Obj())
	f.waitReserved(t, "c", "n", "p")
	if calls.Load() != 2 {
		t.Fatalf("bind calls = %d, want 2", calls.Load())
	}
	if !f.hasEvent("FailedResourceClaimAllocation: binding rejected: connection reset") {
		t.Errorf("events = %v", f.events)
	}
}

// TestFailedBindingFreesDevicesForParkedPods: pa holds the only GPU in
// memory while its binding runs, so pb is parked as unschedulable; when
// pa's binding fails (it always does), no API event says the GPU is free,
// yet pb must move and bind: the safety-net timeout is an hour.
func TestFailedBindingFreesDevicesForParkedPods(t *testing.T) {
	f := start(t, Config{}, withDRA)
	release := make(chan struct{})
	f.bindHook = func(ctx context.Context, pod string) error {
		if pod != "pa" {
			return nil
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return errors.New("connection reset")
	}
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"), newClaim("a", "small"), newClaim("b", "small"))
	f.addPod(makePod("pa").Claim("gpu", "a").Obj())
	eventually(t, "pa to be assumed", func() bool { return f.s.cache.IsAssumed(f.pod("pa").UID) })
	f.addPod(makePod("pb").Claim("gpu", "b").Obj())
	eventually(t, "pb to be parked while pa holds the GPU", func() bool {
		return f.s.queue.Where("default/pb") == queue.Unschedulable
	})
	close(release)
	if node := f.waitNode(t, "pb"); node != "n" {
		t.Fatalf("pb bound to %q, want n", node)
	}
	if n, reserved := f.claimState("b"); n != "n" || len(reserved) != 1 || reserved[0] != "pb" {
		t.Fatalf("claim b: node %q reserved for %v", n, reserved)
	}
}
