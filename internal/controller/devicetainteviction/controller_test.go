package devicetainteviction

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func noExecuteTol(seconds *int64) resourcev1.DeviceToleration {
	return resourcev1.DeviceToleration{Key: "example.com/unhealthy", Operator: resourcev1.DeviceTolerationOpExists,
		Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: seconds}
}

// TestSliceTaintEvicts: a driver republishing its slice with a NoExecute
// taint on a device evicts the pod using it (DisruptionTarget, graceful
// delete, event, metric) and leaves the pod on the other device alone.
func TestSliceTaintEvicts(t *testing.T) {
	e := newEnv(t)
	s := e.slice(2)
	e.podWithClaim("victim", "gpu-0")
	e.podWithClaim("bystander", "gpu-1")
	e.start()
	s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "example.com/unhealthy", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	if _, err := e.c.ResourceSlices().Update(e.ctx, s); err != nil {
		t.Fatalf("taint the slice: %v", err)
	}
	e.eventually("the pod on the tainted device is evicted", e.evicted("victim"))
	e.eventually("the eviction makes an event", e.event("victim", "Marking for deletion"))
	// Counted just after the delete the test may see first.
	e.eventually("the eviction is counted", func() bool { return e.counter("device_taint_eviction_controller_pod_deletions_total") == 1 })
	if p := e.pod("bystander"); p == nil || p.DeletionTimestamp != nil {
		t.Errorf("the pod on the untainted device was evicted: %+v", p)
	}
}

// TestRuleTaintEvicts: a NoExecute DeviceTaintRule evicts the pods of
// both claim APIs whose devices it selects, found through the claims'
// reservedFor (the controller never reads spec.resourceClaims, so claims
// the scheduler will make for extended resources, which the pod does not
// name, count alike; pods/binding refuses such claims until issue 28
// point 2); the rule's status counts the evictions.
func TestRuleTaintEvicts(t *testing.T) {
	e := newEnv(t)
	e.slice(3)
	e.podWithClaim("v1-user", "gpu-0")
	e.seedPodWithClaim("seed-user", "gpu-1")
	e.podWithClaim("v1-user-2", "gpu-2")
	e.start()
	r := e.rule("all", "", resourcev1.DeviceTaintEffectNoExecute)
	for _, p := range []string{"v1-user", "seed-user", "v1-user-2"} {
		e.eventually(p+" is evicted", e.evicted(p))
	}
	e.eventually("the rule's status says the eviction is complete",
		e.ruleSays(r.Name, "Completed", "3 pods evicted since starting the controller."))
	if c := e.ruleCondition(r.Name); c.Status != metav1.ConditionFalse || c.ObservedGeneration != r.Generation {
		t.Errorf("condition %+v", c)
	}
}

// TestTolerationSecondsDelay: a toleration with seconds delays the
// eviction until timeAdded plus those seconds, and no further than the
// controller's next look: the DisruptionTarget condition is stamped no
// earlier than the due time (a causal check, not a timing one).
func TestTolerationSecondsDelay(t *testing.T) {
	e := newEnv(t)
	e.slice(2)
	e.podWithClaim("patient", "gpu-0", noExecuteTol(ptr(int64(2))))
	e.podWithClaim("impatient", "gpu-1")
	e.start()
	r := e.rule("all", "", resourcev1.DeviceTaintEffectNoExecute)
	e.eventually("the untolerating pod is evicted", e.evicted("impatient"))
	e.eventually("the tolerating pod is evicted", e.evicted("patient"))
	p := e.pod("patient")
	if p == nil {
		// No node agent runs here to finish a graceful deletion, so an
		// evicted pod stays, terminating, with its condition.
		t.Fatal("the evicted pod is gone; it should stay terminating (no node agent finishes its deletion)")
	}
	due := r.Spec.Taint.TimeAdded.Add(2 * time.Second)
	if at := disruption(p).LastTransitionTime; at.Time.Before(due) {
		t.Errorf("evicted at %v, before timeAdded %v + 2 s", at, r.Spec.Taint.TimeAdded)
	}
}

// TestToleratedForeverNeverEvicted: a toleration without seconds keeps
// the pod. Watched until a pod on the same rule with a 1 s toleration was
// evicted, then 2 s more: the only times the controller could evict the
// forever-tolerating pod are timeAdded plus its tolerations' seconds, and
// it has none, so by then it has decided for good (both pods were synced
// on the rule's creation; the other one's requeue came due and ran).
func TestToleratedForeverNeverEvicted(t *testing.T) {
	e := newEnv(t)
	e.slice(2)
	e.podWithClaim("forever", "gpu-0", noExecuteTol(nil))
	e.podWithClaim("short", "gpu-1", noExecuteTol(ptr(int64(1))))
	e.start()
	r := e.rule("all", "", resourcev1.DeviceTaintEffectNoExecute)
	e.eventually("the 1 s pod is evicted", e.evicted("short"))
	e.keeps("forever", time.Now().Add(2*time.Second))
	e.eventually("the rule's status has nothing pending",
		e.ruleSays(r.Name, "Completed", "1 pod evicted since starting the controller."))
}

// TestTaintRemovedCancelsEviction: a rule deleted before the toleration
// runs out cancels the pending eviction (with a "Cancelling deletion"
// event); the pod stays past the time it would have gone. While pending,
// the rule's status counts it.
func TestTaintRemovedCancelsEviction(t *testing.T) {
	e := newEnv(t)
	e.slice(1)
	e.podWithClaim("saved", "gpu-0", noExecuteTol(ptr(int64(3))))
	e.start()
	r := e.rule("all", "", resourcev1.DeviceTaintEffectNoExecute)
	e.eventually("the rule's status shows the pending eviction",
		e.ruleSays(r.Name, "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace."))
	if c := e.ruleCondition(r.Name); c.Status != metav1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
	if err := e.c.DeviceTaintRules().Delete(e.ctx, r.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete rule: %v", err)
	}
	e.eventually("the eviction is cancelled", e.event("saved", "Cancelling deletion"))
	// Watched past the due time (timeAdded + 3 s, plus 1 s): the only
	// time the controller could have evicted it.
	e.keeps("saved", r.Spec.Taint.TimeAdded.Add(4*time.Second))
}

// TestSliceTaintRemovedCancelsEviction: a driver republishing its slice
// without the taint before the toleration runs out cancels the eviction;
// a taint republished without timeAdded keeps its time (the pod's
// eviction is not postponed).
func TestSliceTaintRemovedCancelsEviction(t *testing.T) {
	e := newEnv(t)
	s := e.slice(2)
	e.podWithClaim("kept", "gpu-0", noExecuteTol(ptr(int64(3))))
	e.podWithClaim("gone", "gpu-1", noExecuteTol(ptr(int64(2))))
	e.start()
	unhealthy := resourcev1.DeviceTaint{Key: "example.com/unhealthy", Effect: resourcev1.DeviceTaintEffectNoExecute}
	s.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{unhealthy}
	s.Spec.Devices[1].Taints = []resourcev1.DeviceTaint{unhealthy}
	s, err := e.c.ResourceSlices().Update(e.ctx, s)
	if err != nil {
		t.Fatalf("taint the slice: %v", err)
	}
	added := s.Spec.Devices[1].Taints[0].TimeAdded
	// The driver republishes: gpu-0 healthy again, gpu-1's taint without
	// its time.
	s.Spec.Devices[0].Taints = nil
	s.Spec.Devices[1].Taints = []resourcev1.DeviceTaint{unhealthy}
	if s, err = e.c.ResourceSlices().Update(e.ctx, s); err != nil {
		t.Fatalf("republish the slice: %v", err)
	}
	if !s.Spec.Devices[1].Taints[0].TimeAdded.Equal(added) {
		t.Fatalf("republished taint's time %v, want %v kept", s.Spec.Devices[1].Taints[0].TimeAdded, added)
	}
	e.eventually("the pod on the still tainted device is evicted", e.evicted("gone"))
	if p := e.pod("gone"); p != nil {
		if at := disruption(p).LastTransitionTime; at.Time.Before(added.Add(2 * time.Second)) {
			t.Errorf("evicted at %v, before timeAdded %v + 2 s", at, added)
		}
	}
	// "kept" was pending (both pods were synced on the first update) and
	// is cancelled, or was never pending if the controller saw only the
	// republished slice; either way it stays past its due time.
	// Watched until timeAdded + 3 s, plus 1 s: the only time the
	// controller could have evicted it.
	e.keeps("kept", added.Add(4*time.Second))
}

// TestRuleStatusOtherEffects: a None rule says what NoExecute would do;
// a NoSchedule rule that eviction only happens for NoExecute. Neither
// evicts; the None rule switched to NoExecute does.
func TestRuleStatusOtherEffects(t *testing.T) {
	e := newEnv(t)
	e.slice(2)
	e.podWithClaim("user", "gpu-0")
	e.start()
	none := e.rule("none", "", resourcev1.DeviceTaintEffectNone)
	e.eventually("the None rule's status simulates NoExecute", e.ruleSays(none.Name, "NoEffect",
		"2 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if the effect was NoExecute. "+
			"This information will not be updated again. Recreate the DeviceTaintRule to trigger an update."))
	sched := e.rule("sched", "gpu-0", resourcev1.DeviceTaintEffectNoSchedule)
	e.eventually("the NoSchedule rule's status", e.ruleSays(sched.Name, "OtherEffect", "Eviction only happens for the NoExecute effect."))
	if p := e.pod("user"); p == nil || p.DeletionTimestamp != nil {
		t.Fatalf("a None or NoSchedule rule evicted the pod: %+v", p)
	}
	// Switched to NoExecute, the None rule evicts, and says so.
	cur, err := e.c.DeviceTaintRules().Get(e.ctx, none.Name)
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	if _, err := e.c.DeviceTaintRules().Update(e.ctx, cur); err != nil {
		t.Fatalf("switch the rule to NoExecute: %v", err)
	}
	e.eventually("the pod is evicted", e.evicted("user"))
	e.eventually("the switched rule's status", e.ruleSays(none.Name, "Completed", "1 pod evicted since starting the controller."))
}

// TestSeedInstanceHoldsLeavesBelow: a seed claim holding a whole
// instance holds its partitions, which are the v1 devices rules select: a
// rule on a partition evicts the pod holding the whole GPU, not the pod
// holding another GPU.
func TestSeedInstanceHoldsLeavesBelow(t *testing.T) {
	e := newEnv(t)
	e.seedPodWithClaim("whole", "gpu-0")
	e.seedPodWithClaim("other", "gpu-1")
	e.start()
	e.rule("half", "gpu-0--halves--half-0", resourcev1.DeviceTaintEffectNoExecute)
	e.eventually("the pod holding the whole GPU is evicted", e.evicted("whole"))
	if p := e.pod("other"); p == nil || p.DeletionTimestamp != nil {
		t.Fatalf("the pod on the other GPU was evicted: %+v", p)
	}
}
