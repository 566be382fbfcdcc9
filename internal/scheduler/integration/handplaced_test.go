package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// Pods given a node by hand (spec.nodeName at creation) whose claims the
// scheduler allocates on that node in a claim cycle.

// withMetrics returns a Config mutation that installs m.
func withMetrics(m *scheduler.Metrics) func(*scheduler.Config) {
	return func(c *scheduler.Config) { c.Metrics = m }
}

// metric returns the value of a counter (or a histogram's sample count)
// with the given name and result label ("" for none).
func metric(t *testing.T, m *scheduler.Metrics, name, result string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			label := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "result" {
					label = l.GetValue()
				}
			}
			if label != result {
				continue
			}
			if s.GetHistogram() != nil {
				return float64(s.GetHistogram().GetSampleCount())
			}
			return s.GetCounter().GetValue()
		}
	}
	return 0
}

// waitClaimReserved waits until the claim is allocated on the test node
// short and reserved for the pod (by UID), and returns it.
func (e *env) waitClaimReserved(claim, short, pod string) *resourceapi.ResourceClaim {
	e.t.Helper()
	uid := e.getPod(pod).UID
	var c *resourceapi.ResourceClaim
	e.eventually("claim "+claim+" allocated on "+short+" and reserved for "+pod, func() bool {
		var err error
		if c, err = e.c.ResourceClaims(e.ns).Get(callCtx(e.t), claim); err != nil {
			e.t.Fatalf("get claim %s: %v", claim, err)
		}
		a := c.Status.Allocation
		if a == nil || len(a.ResourceHandles) == 0 || a.ResourceHandles[0].StructuredData == nil ||
			a.ResourceHandles[0].StructuredData.NodeName != e.node(short) {
			return false
		}
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.Name == pod && r.UID == uid {
				return true
			}
		}
		return false
	})
	return c
}

// hasEvent reports whether the pod has an event with this reason whose
// message contains text.
func (e *env) hasEvent(pod, reason, text string) bool {
	e.t.Helper()
	for _, ev := range e.events(pod) {
		if ev.Reason == reason && strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}

// (1) A pod created on a node with an unallocated claim: the scheduler
// allocates the claim there and reserves it for the pod through the pod's
// binding; PodScheduled is not written and no condition is needed.
func TestHandPlacedPodGetsItsClaim(t *testing.T) {
	m := scheduler.NewMetrics()
	e := draSetupWith(t, withMetrics(m))
	e.createClaim("c")
	e.createPod(claimPod("p", "c").Node("gpus"))
	c := e.waitClaimReserved("c", "gpus", "p")
	if c.Status.DriverName != draDriver || len(c.Status.ReservedFor) != 1 {
		t.Fatalf("claim status = %+v", c.Status)
	}
	e.eventually("the AllocatedResourceClaims event", func() bool {
		return e.hasEvent("p", scheduler.ReasonAllocatedResourceClaims, "resource claims c on "+e.node("gpus"))
	})
	p := e.getPod("p")
	if cond := scheduler.PodScheduledCondition(p); cond != nil && cond.Status == corev1.ConditionFalse {
		t.Errorf("PodScheduled = %+v", cond)
	}
	if cond := scheduler.ClaimsAllocatedCondition(p); cond != nil {
		t.Errorf("ResourceClaimsAllocated = %+v after a first attempt that succeeded", cond)
	}
	if p.Spec.NodeName != e.node("gpus") || p.Status.Phase == corev1.PodFailed {
		t.Errorf("pod node %q phase %q", p.Spec.NodeName, p.Status.Phase)
	}
	if got := metric(t, m, "allot_scheduler_claim_cycles_total", scheduler.ResultAllocated); got != 1 {
		t.Errorf("allocated claim cycles = %v", got)
	}
}

// (2) A claim no instance of the pod's node satisfies: the pod gets a
// FailedResourceClaimAllocation event and ResourceClaimsAllocated=False
// quoting the clause. A slice that satisfies it appears: the claim is
// allocated (moved by the slice event; the safety net is an hour) and the
// condition turns True.
func TestHandPlacedPodClaimWaitsForASlice(t *testing.T) {
	e := draSetup(t)
	ctx := callCtx(t)
	big := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "big-gpu", Namespace: e.ns},
		Requests: []resourceapi.ResourceRequest{{DriverName: draDriver, ResourceRequestModel: resourceapi.ResourceRequestModel{
			Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
				{Name: "gpu", Selector: `quantities["memory"] >= "64Gi"`}}},
		}}}}
	must(t, "create parameters", func() error { _, err := e.c.ResourceClaimParameters(e.ns).Create(ctx, big); return err })
	e.createClaimWith("c", "big-gpu")
	e.createPod(claimPod("p", "c").Node("gpus"))
	var cond *corev1.PodCondition
	e.eventually("ResourceClaimsAllocated=False", func() bool {
		cond = scheduler.ClaimsAllocatedCondition(e.getPod("p"))
		return cond != nil && cond.Status == corev1.ConditionFalse
	})
	clause := `quantities["memory"] >= "64Gi"`
	if cond.Reason != scheduler.ReasonUnallocatable || !strings.HasPrefix(cond.Message, "0/1 nodes are available: 1 claim "+e.ns+"/c") ||
		!strings.Contains(cond.Message, clause) {
		t.Fatalf("condition = %s %q, want the clause %s quoted", cond.Reason, cond.Message, clause)
	}
	e.eventually("the FailedResourceClaimAllocation event", func() bool {
		return e.hasEvent("p", scheduler.ReasonFailedResourceClaimAllocation, clause)
	})
	if c := scheduler.PodScheduledCondition(e.getPod("p")); c != nil && c.Status == corev1.ConditionFalse {
		t.Fatalf("PodScheduled = %+v", c)
	}

	slice := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.name + "-big"}}
	slice.Spec.NodeName, slice.Spec.DriverName = e.node("gpus"), draDriver
	slice.Spec.Partitionable = &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{{
		Name: "big-0", Attributes: []resourceapi.Attribute{{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: ptrTo(resource.MustParse("80Gi"))}}},
	}}}
	must(t, "create slice", func() error { _, err := e.c.NodeResourceSlices().Create(ctx, slice); return err })
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.NodeResourceSlices().Delete(c, slice.Name, metav1.DeleteOptions{})
	})
	c := e.waitClaimReserved("c", "gpus", "p")
	if got := c.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID; !strings.Contains(got, "big-0") {
		t.Errorf("allocated instance %q, want big-0", got)
	}
	e.eventually("ResourceClaimsAllocated=True", func() bool {
		cond = scheduler.ClaimsAllocatedCondition(e.getPod("p"))
		return cond != nil && cond.Status == corev1.ConditionTrue
	})
	if cond.Reason != scheduler.ReasonAllocated {
		t.Errorf("condition = %+v", cond)
	}
	if p := e.getPod("p"); p.Status.Phase == corev1.PodFailed {
		t.Errorf("pod phase %s", p.Status.Phase)
	}
}

// (3) Resource fit is not applied to a pod placed by hand: on a node
// whose cpu is all taken, it still gets its claim.
func TestHandPlacedPodOnFullNodeGetsItsClaim(t *testing.T) {
	e := draSetup(t)
	e.createPod(schedtest.MakePod("hog").Req("cpu", "8").Node("gpus"))
	e.createClaim("c")
	e.createPod(claimPod("p", "c").Req("cpu", "2").Node("gpus"))
	e.waitClaimReserved("c", "gpus", "p")
	if cond := scheduler.ClaimsAllocatedCondition(e.getPod("p")); cond != nil && cond.Status == corev1.ConditionFalse {
		t.Fatalf("condition = %+v", cond)
	}
}

// (4) A pod bound by a normal cycle has its claims reserved by that
// binding: its later updates (a node agent's status) cause no claim cycle
// and no second binding. A hand-placed pod created after those updates is
// the barrier: once its claim is reserved, the scheduler has seen them.
func TestScheduledPodCausesNoClaimCycle(t *testing.T) {
	m := scheduler.NewMetrics()
	e := draSetupWith(t, withMetrics(m))
	e.createClaim("c")
	e.createPod(claimPod("p", "c"))
	if node := e.waitBound("p"); node != "gpus" {
		t.Fatalf("bound to %s", node)
	}
	e.waitClaimReserved("c", "gpus", "p")
	for i := range 3 {
		p := e.getPod("p")
		p.Status.Phase = corev1.PodPending
		p.Status.Reason, p.Status.Message = "Testing", fmt.Sprintf("status update %d", i)
		if _, err := e.c.Pods(e.ns).UpdateStatus(callCtx(t), p); err != nil {
			t.Fatalf("update status: %v", err)
		}
	}
	e.createClaim("probe")
	e.createPod(claimPod("probe", "probe").Node("gpus"))
	e.waitClaimReserved("probe", "gpus", "probe")
	e.eventually("the probe's binding to be counted", func() bool {
		return metric(t, m, "allot_scheduler_binding_duration_seconds", "success") == 2
	})
	// The probe's own claim cycle may first wait for its claim to reach
	// the scheduler's informer (the claim and the pod come through two
	// watches): count the cycles that allocated.
	if n := metric(t, m, "allot_scheduler_claim_cycles_total", scheduler.ResultAllocated); n != 1 {
		t.Errorf("%v claim cycles allocated, want 1 (the probe's)", n)
	}
	if n := metric(t, m, "allot_scheduler_claim_cycles_total", scheduler.ResultError); n != 0 {
		t.Errorf("%v claim cycles failed", n)
	}
	// Any claim cycle of p, whatever its outcome, writes this condition.
	if c := scheduler.ClaimsAllocatedCondition(e.getPod("p")); c != nil {
		t.Errorf("p had a claim cycle: ResourceClaimsAllocated=%s %s", c.Status, c.Message)
	}
	if n := metric(t, m, "allot_scheduler_binding_duration_seconds", "error"); n != 0 {
		t.Errorf("%v failed bindings", n)
	}
	if n := metric(t, m, "allot_scheduler_schedule_attempts_total", scheduler.ResultScheduled); n != 1 {
		t.Errorf("%v scheduled attempts, want 1", n)
	}
}
