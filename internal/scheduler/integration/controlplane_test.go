package integration

import (
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// Claims allocated by a driver's controller (seed 003), with a fake
// driver controller in the test.

// poolLabel marks the test's nodes; the fake drivers' classes select it
// with suitableNodes, which keeps the cluster's own node out.
const poolLabel = "allot.dev/test-pool"

func cpNodes(names ...string) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range names {
		out = append(out, schedtest.MakeNode(n).Alloc("cpu", "4").Alloc("pods", "10").Label(poolLabel, "fabric").Obj())
	}
	return out
}

// waitContextGone waits until the pod's PodSchedulingContext is deleted.
func (e *env) waitContextGone(pod string) {
	e.t.Helper()
	e.eventually("the PodSchedulingContext of "+pod+" to be deleted", func() bool {
		_, err := e.c.PodSchedulingContexts(e.ns).Get(callCtx(e.t), pod)
		return apierrors.IsNotFound(err)
	})
}

// reservedFor reports whether the claim is reserved for the pod.
func (e *env) reservedFor(claim, pod string) bool {
	uid := e.getPod(pod).UID
	return slices.ContainsFunc(e.getClaim(claim).Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
		return r.UID == uid
	})
}

// An Immediate claim is allocated by the driver without a pod; a pod
// using it waits for that, then lands only where the allocation is
// available, and reserves the claim with its binding.
func TestControlPlaneImmediateClaim(t *testing.T) {
	e := newEnv(t, nil, cpNodes("n1", "n2", "n3")...)
	d := &fakeDriver{e: e, class: e.name + "-fabric", immediateNodes: []string{e.node("n2")}}
	d.createClass(nil)
	e.createCPClaim("c", d.class, resourceapi.AllocationModeImmediate)
	e.createPod(schedtest.MakePod("p").Req("cpu", "1").Claim("net", "c"))
	e.waitMessage("p", dynamicresources.ReasonWaitingForAllocation+" (claim "+e.ns+"/c, allocation mode Immediate)")
	d.run()
	if node := e.waitBound("p"); node != "n2" {
		t.Fatalf("pod bound to %s, want n2 (availableOnNodes)", node)
	}
	if !e.reservedFor("c", "p") {
		t.Errorf("claim c not reserved for p: %+v", e.getClaim("c").Status)
	}
	// A second pod cannot share the claim (not shareable): it waits for
	// its consumer to go, and is never bound elsewhere.
	e.createPod(schedtest.MakePod("q").Req("cpu", "1").Claim("net", "c"))
	e.waitMessage("q", "claim "+e.ns+"/c is not shareable and in use by pods/p")
	e.deletePod("p")
	e.eventually("claim c released by p", func() bool {
		c := e.getClaim("c")
		if len(c.Status.ReservedFor) == 0 {
			return true
		}
		// No claim controller runs here: drop p's reservation as it would.
		c.Status.ReservedFor = nil
		_, _ = e.c.ResourceClaims(e.ns).UpdateStatus(callCtx(t), c)
		return false
	})
	if node := e.waitBound("q"); node != "n2" {
		t.Fatalf("q bound to %s, want n2", node)
	}
	if c := e.getClaim("c"); c.Status.Allocation == nil {
		t.Error("the Immediate claim was deallocated while unused")
	}
}

// WaitForFirstConsumer: the scheduler creates the pod's context with its
// potential nodes and selects one at once (one pending claim); the driver
// rejects n1 and n2, the scheduler selects n3, the driver allocates and
// reserves, the scheduler binds and deletes the context.
func TestControlPlaneNegotiation(t *testing.T) {
	e := newEnv(t, nil, cpNodes("n1", "n2", "n3")...)
	good := e.node("n3")
	d := (&fakeDriver{e: e, class: e.name + "-fabric", unsuitable: func(_, node string) bool { return node != good }}).start(nil)
	e.createCPClaim("c", e.name+"-fabric", "")
	e.createPod(schedtest.MakePod("p").Req("cpu", "1").Claim("net", "c"))
	if node := e.waitBound("p"); node != "n3" {
		t.Fatalf("bound to %s, want n3", node)
	}
	c := e.getClaim("c")
	if c.Status.Allocation == nil || !e.reservedFor("c", "p") || c.Status.ControllerName != e.name+"-fabric.example.com" {
		t.Fatalf("claim status %+v", c.Status)
	}
	e.waitContextGone("p")
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.maxPotential == 0 || d.maxPotential > resourceapi.PodSchedulingNodeListMaxSize {
		t.Errorf("potential nodes: at most %d, want 1..128", d.maxPotential)
	}
	for _, sc := range d.seen {
		if sc.Spec.SelectedNode != good && slices.ContainsFunc(sc.Status.ResourceClaims, func(s resourceapi.ResourceClaimSchedulingStatus) bool {
			return slices.Contains(s.UnsuitableNodes, sc.Spec.SelectedNode)
		}) {
			t.Errorf("scheduler selected %s after the driver reported it unsuitable", sc.Spec.SelectedNode)
		}
	}
}

// Two claims of two drivers: no node is selected before both answered;
// each driver rejects a different node and the pod lands on the third.
func TestControlPlaneTwoDrivers(t *testing.T) {
	e := newEnv(t, nil, cpNodes("n1", "n2", "n3")...)
	a := (&fakeDriver{e: e, class: e.name + "-fabric-a", unsuitable: func(_, n string) bool { return n == e.node("n1") }}).start(nil)
	b := (&fakeDriver{e: e, class: e.name + "-fabric-b", unsuitable: func(_, n string) bool { return n == e.node("n2") }}).start(nil)
	e.createCPClaim("a", e.name+"-fabric-a", "")
	e.createCPClaim("b", e.name+"-fabric-b", "")
	e.createPod(schedtest.MakePod("p").Req("cpu", "1").Claim("a", "a").Claim("b", "b"))
	if node := e.waitBound("p"); node != "n3" {
		t.Fatalf("bound to %s, want n3", node)
	}
	if !e.reservedFor("a", "p") || !e.reservedFor("b", "p") {
		t.Fatal("claims not reserved for the pod")
	}
	for _, d := range []*fakeDriver{a, b} {
		d.mu.Lock()
		for _, sc := range d.seen {
			if len(sc.Status.ResourceClaims) < 2 {
				t.Errorf("node %s selected with answers %+v: want both drivers' answers first", sc.Spec.SelectedNode, sc.Status.ResourceClaims)
			}
		}
		d.mu.Unlock()
	}
	e.waitContextGone("p")
}

// Recovery: the claim is allocated on n1 (by an earlier consumer), where
// the pod's cpu does not fit; the scheduler requests deallocation, the
// driver deallocates, and the claim is allocated again where the pod fits.
func TestControlPlaneDeallocationRecovery(t *testing.T) {
	e := newEnv(t, nil, append(cpNodes("n2"), schedtest.MakeNode("n1").Alloc("cpu", "1").Alloc("pods", "10").Label(poolLabel, "fabric").Obj())...)
	d := &fakeDriver{e: e, class: e.name + "-fabric"}
	d.start(nil)
	e.createCPClaim("c", e.name+"-fabric", "")
	d.allocate(callCtx(t), e.getClaim("c"), []string{e.node("n1")}, nil)
	e.eventually("claim allocated on n1", func() bool { return e.getClaim("c").Status.Allocation != nil })
	e.createPod(schedtest.MakePod("p").Req("cpu", "2").Claim("net", "c"))
	if node := e.waitBound("p"); node != "n2" {
		t.Fatalf("bound to %s, want n2", node)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.deallocated, "c") {
		t.Errorf("claim c was not deallocated on request (deallocated: %v)", d.deallocated)
	}
	if !e.hasEvent("p", scheduler.ReasonFailedScheduling, "Requested deallocation of claim "+e.ns+"/c") {
		t.Error("no FailedScheduling event names the deallocation")
	}
}

// One pod, one structured and one control-plane claim: the driver
// allocates its claim for the node the structured claim fits on, and the
// binding allocates the structured claim and reserves both.
func TestControlPlaneMixedWithStructured(t *testing.T) {
	e := draSetup(t)
	e.createNode(schedtest.MakeNode("plain").Alloc("cpu", "8").Alloc("pods", "20").Obj())
	(&fakeDriver{e: e, class: e.name + "-fabric"}).start(func(c *resourceapi.ResourceClass) { c.SuitableNodes = nil })
	e.createClaim("gpu")
	e.createCPClaim("net", e.name+"-fabric", "")
	e.createPod(schedtest.MakePod("p").Req("cpu", "100m").Claim("gpu", "gpu").Claim("net", "net"))
	if node := e.waitBound("p"); node != "gpus" {
		t.Fatalf("bound to %s, want gpus", node)
	}
	e.waitClaimReserved("gpu", "gpus", "p")
	if !e.reservedFor("net", "p") || e.getClaim("net").Status.ControllerName == "" {
		t.Fatalf("control-plane claim: %+v", e.getClaim("net").Status)
	}
	e.waitContextGone("p")
}

// A driver that never answers: the pod stays Pending with the seed's
// message (condition and event); other pods are still scheduled.
func TestControlPlaneSilentDriver(t *testing.T) {
	e := newEnv(t, nil, cpNodes("n1", "n2")...)
	(&fakeDriver{e: e, class: e.name + "-fabric", silent: true}).start(nil)
	e.createCPClaim("a", e.name+"-fabric", "")
	e.createCPClaim("b", e.name+"-fabric", "")
	e.createPod(schedtest.MakePod("one").Req("cpu", "1").Claim("net", "a"))
	e.createPod(schedtest.MakePod("two").Req("cpu", "1").Claim("x", "a").Claim("y", "b"))
	e.waitMessage("one", dynamicresources.ReasonWaitingForAllocation)
	e.waitMessage("two", dynamicresources.ReasonWaitingForInformation)
	e.eventually("a FailedScheduling event with the seed's message", func() bool {
		return e.hasEvent("one", scheduler.ReasonFailedScheduling, dynamicresources.ReasonWaitingForAllocation)
	})
	sc, err := e.c.PodSchedulingContexts(e.ns).Get(callCtx(t), "two")
	if err != nil {
		t.Fatalf("context of the pod with two claims: %v", err)
	}
	if sc.Spec.SelectedNode != "" || len(sc.Spec.PotentialNodes) != 2 {
		t.Errorf("context spec %+v: want two potential nodes and none selected", sc.Spec)
	}
	rv := sc.ResourceVersion
	e.createPod(schedtest.MakePod("other").Req("cpu", "1"))
	e.waitBound("other")
	// The waiting pod is not retried by unrelated events, and its
	// context is not rewritten.
	if sc, err := e.c.PodSchedulingContexts(e.ns).Get(callCtx(t), "two"); err != nil || sc.ResourceVersion != rv {
		t.Errorf("context rewritten without a new decision (rv %s -> %s, %v)", rv, sc.ResourceVersion, err)
	}
	if p := e.getPod("one"); p.Spec.NodeName != "" || !strings.Contains(scheduler.PodScheduledCondition(p).Message, "claims "+e.ns+"/a") {
		t.Errorf("pod one: node %q, condition %+v", p.Spec.NodeName, scheduler.PodScheduledCondition(p))
	}
}
