package controller

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// waitAllocated waits until the claim is allocated and returns it.
func waitAllocated(t *testing.T, ns, name string) *resourcev1alpha2.ResourceClaim {
	t.Helper()
	var claim *resourcev1alpha2.ResourceClaim
	eventually(t, "claim "+name+" allocated", func() bool {
		claim = getClaim(t, ns, name)
		return claim.Status.Allocation != nil
	})
	return claim
}

// consistently checks cond for a while; for "nothing happens" checks.
func consistently(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s did not hold", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestImmediateAllocation(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(4)
	startController(t, ns, v)
	otherController := createClaim(t, ns, makeClaim("other-controller").class(classOtherController).immediate())
	otherDriver := createClaim(t, ns, makeClaim("other-driver").class(classOtherDriver).immediate())
	wffc := createClaim(t, ns, makeClaim("wffc"))
	created := createClaim(t, ns, makeClaim("imm").immediate())

	claim := waitAllocated(t, ns, "imm")
	st := claim.Status
	if st.DriverName != testDriver || st.ControllerName != testDriver {
		t.Errorf("status driverName %q, controllerName %q, want %s for both", st.DriverName, st.ControllerName, testDriver)
	}
	if h := st.Allocation.ResourceHandles; len(h) != 1 || h[0].DriverName != testDriver || h[0].Data != `{"unit":"unit-0"}` {
		t.Errorf("resourceHandles = %+v, want one of %s with unit-0", h, testDriver)
	}
	if st.Allocation.AvailableOnNodes != nil || len(st.ReservedFor) != 0 {
		t.Errorf("availableOnNodes %v, reservedFor %v, want neither", st.Allocation.AvailableOnNodes, st.ReservedFor)
	}
	if !slices.Contains(claim.Finalizers, Finalizer(testDriver)) {
		t.Errorf("finalizers = %v, want %s", claim.Finalizers, Finalizer(testDriver))
	}
	if _, allocates, _, node := v.state(created.UID); allocates != 1 || node != "" {
		t.Errorf("Allocate called %d times for node %q, want once for no node", allocates, node)
	}
	// Claims of other controllers, and WaitForFirstConsumer claims
	// without a pod, are left alone.
	consistently(t, "other claims untouched", func() bool {
		for _, c := range []*resourcev1alpha2.ResourceClaim{otherController, otherDriver, wffc} {
			got := getClaim(t, ns, c.Name)
			if got.Status.Allocation != nil || len(got.Finalizers) > 0 {
				t.Logf("claim %s: %+v, finalizers %v", c.Name, got.Status, got.Finalizers)
				return false
			}
		}
		return true
	})
}

// TestWaitForFirstConsumer plays the scheduler's part of seed 003's
// negotiation: potential nodes, then a selected node.
func TestWaitForFirstConsumer(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(4, "n2")
	startController(t, ns, v)
	claim := createClaim(t, ns, makeClaim("accel"))
	createClaim(t, ns, makeClaim("nic").class(classOtherDriver))
	pod := createPod(t, ns, "pod", "accel", "nic")
	sc := createContext(t, pod, resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{"n1", "n2", "n3"}})
	// Another driver answered for its claim already.
	sc.Status.ResourceClaims = []resourcev1alpha2.ResourceClaimSchedulingStatus{{Name: "nic", UnsuitableNodes: []string{"n3"}}}
	if _, err := admin.PodSchedulingContexts(ns).UpdateStatus(testContext(t), sc); err != nil {
		t.Fatalf("write the other driver's answer: %v", err)
	}

	eventually(t, "unsuitable nodes [n2] for accel", func() bool {
		nodes, ok := entryOf(getContext(t, ns, "pod"), "accel")
		return ok && slices.Equal(nodes, []string{"n2"})
	})
	if nodes, _ := entryOf(getContext(t, ns, "pod"), "nic"); !slices.Equal(nodes, []string{"n3"}) {
		t.Errorf("the other driver's entry became %v, want [n3]", nodes)
	}

	// The scheduler no longer lists n2 as potential; it is checked again
	// and stays unsuitable.
	updateContextSpec(t, ns, "pod", func(s *resourcev1alpha2.PodSchedulingContextSpec) { s.PotentialNodes = []string{"n1", "n3"} })
	eventually(t, "n2 checked again", func() bool { return slices.Equal(v.lastChecked(), []string{"n1", "n3", "n2"}) })
	if nodes, _ := entryOf(getContext(t, ns, "pod"), "accel"); !slices.Equal(nodes, []string{"n2"}) {
		t.Errorf("unsuitable nodes of accel = %v, want n2 still", nodes)
	}
	// Once the vendor reaches n2, the next check clears it.
	v.setUnreachable()
	updateContextSpec(t, ns, "pod", func(s *resourcev1alpha2.PodSchedulingContextSpec) { s.PotentialNodes = []string{"n1"} })
	eventually(t, "accel suitable everywhere", func() bool {
		nodes, ok := entryOf(getContext(t, ns, "pod"), "accel")
		return ok && len(nodes) == 0
	})

	updateContextSpec(t, ns, "pod", func(s *resourcev1alpha2.PodSchedulingContextSpec) { s.SelectedNode = "n1" })
	got := waitAllocated(t, ns, "accel")
	if r := got.Status.ReservedFor; len(r) != 1 || r[0].UID != pod.UID || r[0].Resource != "pods" || r[0].Name != "pod" {
		t.Errorf("reservedFor = %+v, want the pod", r)
	}
	if a := got.Status.Allocation.AvailableOnNodes; a == nil || a.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n1" {
		t.Errorf("availableOnNodes = %+v, want n1", a)
	}
	if _, allocates, _, node := v.state(claim.UID); allocates != 1 || node != "n1" {
		t.Errorf("Allocate called %d times for node %q, want once for n1", allocates, node)
	}
	eventually(t, "accel's entry dropped once allocated", func() bool {
		_, ok := entryOf(getContext(t, ns, "pod"), "accel")
		return !ok
	})
	if nodes, _ := entryOf(getContext(t, ns, "pod"), "nic"); !slices.Equal(nodes, []string{"n3"}) {
		t.Errorf("the other driver's entry became %v, want [n3]", nodes)
	}
}

// TestSelectedNodeFails: an allocation the vendor refuses for the selected
// node marks that node unsuitable and is reported on the claim.
func TestSelectedNodeFails(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(1, "n2")
	startController(t, ns, v)
	claim := createClaim(t, ns, makeClaim("accel"))
	pod := createPod(t, ns, "pod", "accel")
	createContext(t, pod, resourcev1alpha2.PodSchedulingContextSpec{SelectedNode: "n2", PotentialNodes: []string{"n1"}})
	eventually(t, "n2 unsuitable", func() bool {
		nodes, _ := entryOf(getContext(t, ns, "pod"), "accel")
		return slices.Equal(nodes, []string{"n2"})
	})
	eventually(t, "an AllocationFailed event", func() bool { return hasEvent(t, ns, claim.UID, ReasonAllocationFailed) })
	if got := getClaim(t, ns, "accel"); got.Status.Allocation != nil {
		t.Errorf("claim allocated: %+v", got.Status.Allocation)
	}
}

// TestContextOfMissingPodIgnored: a context whose pod does not exist is
// not answered, until the pod appears.
func TestContextOfMissingPodIgnored(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(1, "n1")
	startController(t, ns, v)
	createClaim(t, ns, makeClaim("accel"))
	sc := &resourcev1alpha2.PodSchedulingContext{ObjectMeta: metav1.ObjectMeta{Name: "ghost", Namespace: ns},
		Spec: resourcev1alpha2.PodSchedulingContextSpec{PotentialNodes: []string{"n1"}}}
	if _, err := admin.PodSchedulingContexts(ns).Create(testContext(t), sc); err != nil {
		t.Fatal(err)
	}
	consistently(t, "no answer without a pod", func() bool { return len(getContext(t, ns, "ghost").Status.ResourceClaims) == 0 })
	createPod(t, ns, "ghost", "accel")
	eventually(t, "the answer once the pod exists", func() bool {
		nodes, _ := entryOf(getContext(t, ns, "ghost"), "accel")
		return slices.Equal(nodes, []string{"n1"})
	})
}

// allocateForPod runs the negotiation to its end: the claim allocated for
// node n1 and reserved for a new pod.
func allocateForPod(t *testing.T, ns, claimName, podName string) *resourcev1alpha2.ResourceClaim {
	t.Helper()
	pod := createPod(t, ns, podName, claimName)
	createContext(t, pod, resourcev1alpha2.PodSchedulingContextSpec{SelectedNode: "n1"})
	claim := waitAllocated(t, ns, claimName)
	if len(claim.Status.ReservedFor) != 1 {
		t.Fatalf("reservedFor = %v, want the pod", claim.Status.ReservedFor)
	}
	return claim
}

// TestDeallocationRequested: the scheduler takes the reservation back and
// asks for deallocation; the driver deallocates and lets go of the claim.
func TestDeallocationRequested(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(1)
	startController(t, ns, v)
	createClaim(t, ns, makeClaim("accel"))
	claim := allocateForPod(t, ns, "accel", "pod")
	if err := admin.PodSchedulingContexts(ns).Delete(testContext(t), "pod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	claim.Status.ReservedFor = nil
	claim.Status.DeallocationRequested = true
	if _, err := admin.ResourceClaims(ns).UpdateStatus(testContext(t), claim); err != nil {
		t.Fatalf("request deallocation: %v", err)
	}
	eventually(t, "the claim deallocated", func() bool {
		c := getClaim(t, ns, "accel")
		return c.Status.Allocation == nil && len(c.Finalizers) == 0
	})
	got := getClaim(t, ns, "accel")
	if st := got.Status; st.DeallocationRequested || st.DriverName != "" || st.ControllerName != "" {
		t.Errorf("status after deallocation = %+v, want empty", st)
	}
	if units, _, deallocates, _ := v.state(claim.UID); deallocates != 1 || len(units) != 0 {
		t.Errorf("Deallocate called %d times, units held %v; want once and none", deallocates, units)
	}
}

// TestDeletionWaitsForReservation: a deleted claim is deallocated only
// once nobody reserves it; then it goes away.
func TestDeletionWaitsForReservation(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(1)
	startController(t, ns, v)
	createClaim(t, ns, makeClaim("accel"))
	claim := allocateForPod(t, ns, "accel", "pod")
	if err := admin.ResourceClaims(ns).Delete(testContext(t), "accel", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deletionTimestamp", func() bool { return getClaim(t, ns, "accel").DeletionTimestamp != nil })
	consistently(t, "allocation kept while reserved", func() bool {
		_, _, deallocates, _ := v.state(claim.UID)
		c := getClaim(t, ns, "accel")
		return deallocates == 0 && c.Status.Allocation != nil && len(c.Finalizers) == 1
	})
	// The pod goes; the controller manager removes its reservation.
	if err := admin.Pods(ns).Delete(testContext(t), "pod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim gone", func() bool { return claimGone(t, ns, "accel") })
	if units, _, deallocates, _ := v.state(claim.UID); deallocates != 1 || len(units) != 0 {
		t.Errorf("Deallocate called %d times, units held %v; want once and none", deallocates, units)
	}
}

// TestRestartMidAllocation kills the controller between the vendor's
// Allocate and the status write (by cancelling it from Allocate): after a
// restart the claim is allocated once, with the unit reserved before; a
// claim deleted while the controller was down is deallocated although its
// allocation never reached the API, so no unit leaks.
func TestRestartMidAllocation(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(2)
	r := startController(t, ns, v)
	killed := v.killAfterAllocate(r.cancel)
	a := createClaim(t, ns, makeClaim("a").immediate())
	waitKilled(t, killed)
	r.stop(t)
	if units, allocates, _, _ := v.state(a.UID); allocates != 1 || units[a.UID] != "unit-0" {
		t.Fatalf("before the restart: Allocate called %d times, units %v; want once, unit-0 for a", allocates, units)
	}
	if c := getClaim(t, ns, "a"); c.Status.Allocation != nil || !slices.Contains(c.Finalizers, Finalizer(testDriver)) {
		t.Fatalf("killed mid-allocation: allocation %v, finalizers %v; want none and ours", c.Status.Allocation, c.Finalizers)
	}

	r = startController(t, ns, v)
	got := waitAllocated(t, ns, "a")
	if d := got.Status.Allocation.ResourceHandles[0].Data; d != `{"unit":"unit-0"}` {
		t.Errorf("allocation data %s, want unit-0 as reserved before the restart", d)
	}
	if units, allocates, _, _ := v.state(a.UID); allocates != 2 || len(units) != 1 {
		t.Errorf("after the restart: Allocate called %d times, units %v; want twice, one unit", allocates, units)
	}

	// Kill again mid-allocation of b, delete b while the controller is
	// down, restart: b's unit is released.
	killed = v.killAfterAllocate(r.cancel)
	b := createClaim(t, ns, makeClaim("b").immediate())
	waitKilled(t, killed)
	r.stop(t)
	if units, _, _, _ := v.state(b.UID); units[b.UID] != "unit-1" {
		t.Fatalf("b holds %q, want unit-1", units[b.UID])
	}
	if err := admin.ResourceClaims(ns).Delete(testContext(t), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, ns, v)
	eventually(t, "b gone", func() bool { return claimGone(t, ns, "b") })
	if units, _, deallocates, _ := v.state(b.UID); deallocates != 1 || len(units) != 1 || units[a.UID] != "unit-0" {
		t.Errorf("after deleting b: Deallocate called %d times, units %v; want once, only a's unit-0", deallocates, units)
	}
	// The freed unit is allocatable again.
	c := createClaim(t, ns, makeClaim("c").immediate())
	waitAllocated(t, ns, "c")
	if units, _, _, _ := v.state(c.UID); units[c.UID] != "unit-1" {
		t.Errorf("c holds %q, want the freed unit-1", units[c.UID])
	}
}

func waitKilled(t *testing.T, killed <-chan struct{}) {
	t.Helper()
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for an Allocate call")
	}
}

// TestClassDeletedBeforeClaim: a claim whose class was deleted is still
// deallocated when it is deleted; the driver's right to write it comes
// from the claim's status.driverName then.
func TestClassDeletedBeforeClaim(t *testing.T) {
	ns := newNamespace(t)
	v := newFakeVendor(1)
	startController(t, ns, v)
	class := &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-class"}, DriverName: testDriver, ControllerName: testDriver}
	if _, err := admin.ResourceClasses().Create(testContext(t), class); err != nil {
		t.Fatal(err)
	}
	claim := createClaim(t, ns, makeClaim("accel").class(class.Name).immediate())
	waitAllocated(t, ns, "accel")
	if err := admin.ResourceClasses().Delete(testContext(t), class.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.ResourceClaims(ns).Delete(testContext(t), "accel", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim gone", func() bool { return claimGone(t, ns, "accel") })
	if units, _, deallocates, _ := v.state(claim.UID); deallocates != 1 || len(units) != 0 {
		t.Errorf("Deallocate called %d times, units held %v; want once and none", deallocates, units)
	}
}
