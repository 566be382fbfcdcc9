package dynamicresources_test

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/queue"
	"allot.dev/allot/pkg/allocator"
)

// allocated returns a copy of c allocated with a structured handle on
// node, reserved for consumer.
func allocated(c *resourceapi.ResourceClaim, node, consumer string) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{{
		DriverName: driver, StructuredData: &resourceapi.StructuredResourceHandle{NodeName: node},
	}}}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: consumer, UID: types.UID("uid-" + consumer)}}
	return c
}

// templatePod uses template t for entry gpu; recorded names the claim in
// its status ("" for none yet).
func templatePod(name, recorded string) *corev1.Pod {
	p := podUsing(name)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("t")}}
	if recorded != "" {
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr(recorded)}}
	}
	return p
}

// claimEvent is one claim event delivered to a parked pod, and whether
// it moves the pod.
type claimEvent struct {
	pod      *corev1.Pod
	ev       framework.ClusterEvent
	old, new *resourceapi.ResourceClaim
	moved    bool
}

// claimEvents are the cases of TestClaimEventsMoveOnlyPodsTheyCanHelp.
func claimEvents() map[string]claimEvent {
	mine := claim("mine", "small")
	other := claim("other", "small")
	otherElsewhere := other.DeepCopy()
	otherElsewhere.Namespace = "elsewhere"
	// The claim the controller generates for p's entry gpu, and a user's
	// claim that merely names p as an owner.
	owned := claim("p-gpu-x7k2", "small")
	owned.OwnerReferences = []metav1.OwnerReference{allocator.PodOwnerReference(podUsing("p"))}
	owned.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: "gpu"}
	ownerOnly := claim("p-gpu-user", "small")
	ownerOnly.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p"}}
	deallocating := allocated(other, "n1", "q")
	deallocating.Status.DeallocationRequested = true
	add := framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add}
	update := framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Update}
	del := framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Delete}
	return map[string]claimEvent{
		// The pod's own claims.
		"own claim created":                   {pod: podUsing("p", "mine"), ev: add, new: mine, moved: true},
		"own claim allocated for another pod": {pod: podUsing("p", "mine"), ev: update, old: mine, new: allocated(mine, "n1", "q"), moved: true},
		"own claim released by another pod": {pod: podUsing("p", "mine"), ev: update,
			old: allocated(mine, "n1", "q"), new: func() *resourceapi.ResourceClaim {
				c := allocated(mine, "n1", "q")
				c.Status.ReservedFor = nil
				return c
			}(), moved: true},
		"own claim deleted":                        {pod: podUsing("p", "mine"), ev: del, old: mine, moved: true},
		"recorded template claim created":          {pod: templatePod("p", "mine"), ev: add, new: mine, moved: true},
		"template claim created, not recorded":     {pod: templatePod("p", ""), ev: add, new: owned, moved: true},
		"a claim that only names the pod as owner": {pod: templatePod("p", ""), ev: add, new: ownerOnly, moved: false},
		"own control-plane claim allocated": {pod: podUsing("p", "mine"), ev: update, old: mine, new: func() *resourceapi.ResourceClaim {
			c := mine.DeepCopy()
			c.Status.Allocation = &resourceapi.AllocationResult{}
			return c
		}(), moved: true},
		"claim of the same name in another space": {pod: podUsing("p", "other"), ev: add, new: otherElsewhere},
		// Other claims freeing instances.
		"other claim deallocated":                    {pod: podUsing("p", "mine"), ev: update, old: allocated(other, "n1", "q"), new: other, moved: true},
		"other allocated claim deleted":              {pod: podUsing("p", "mine"), ev: del, old: allocated(other, "n1", "q"), moved: true},
		"other claim freed, template claim recorded": {pod: templatePod("p", "mine"), ev: update, old: allocated(other, "n1", "q"), new: other, moved: true},
		// Events that cannot help.
		"other claim freed, template claim unknown": {pod: templatePod("p", ""), ev: update, old: allocated(other, "n1", "q"), new: other},
		"other claim created":                       {pod: podUsing("p", "mine"), ev: add, new: other},
		"other claim allocated":                     {pod: podUsing("p", "mine"), ev: update, old: other, new: allocated(other, "n1", "q")},
		"other claim's reservation dropped": {pod: podUsing("p", "mine"), ev: update, old: allocated(other, "n1", "q"), new: func() *resourceapi.ResourceClaim {
			c := allocated(other, "n1", "q")
			c.Status.ReservedFor = nil
			return c
		}()},
		"other claim's deallocation requested": {pod: podUsing("p", "mine"), ev: update, old: allocated(other, "n1", "q"), new: deallocating},
		"other unallocated claim deleted":      {pod: podUsing("p", "mine"), ev: del, old: other},
		"claim created for another pod":        {pod: templatePod("q", ""), ev: add, new: owned},
	}
}

// TestClaimEventsMoveOnlyPodsTheyCanHelp parks a pod that the plugin
// rejected in a real queue with the plugin's registrations, delivers one
// claim event, and checks whether the pod was moved.
func TestClaimEventsMoveOnlyPodsTheyCanHelp(t *testing.T) {
	for name, tc := range claimEvents() {
		t.Run(name, func(t *testing.T) {
			var oldObj, newObj any
			if tc.old != nil {
				oldObj = tc.old
			}
			if tc.new != nil {
				newObj = tc.new
			}
			if moved := movedBy(t, tc.pod, tc.ev, oldObj, newObj); moved != tc.moved {
				t.Fatalf("%s moved the pod: %v, want %v", tc.ev, moved, tc.moved)
			}
		})
	}
}

// TestV1ClaimEventsMoveLikeSeedEvents delivers each seed claim event of
// TestClaimEventsMoveOnlyPodsTheyCanHelp as the event of the claims' v1
// forms: the v1 hint, which reads the v1 claim in place, moves the pod
// exactly when the seed hint does (it did so by judging the claims'
// converted v1alpha2 views before).
func TestV1ClaimEventsMoveLikeSeedEvents(t *testing.T) {
	for name, tc := range claimEvents() {
		t.Run(name, func(t *testing.T) {
			var oldObj, newObj any
			if tc.old != nil {
				oldObj = resourceconv.ClaimToV1(tc.old)
			}
			if tc.new != nil {
				newObj = resourceconv.ClaimToV1(tc.new)
			}
			ev := framework.ClusterEvent{Resource: framework.ResourceClaimV1, ActionType: tc.ev.ActionType}
			if moved := movedBy(t, tc.pod, ev, oldObj, newObj); moved != tc.moved {
				t.Fatalf("%s moved the pod: %v, want %v", ev, moved, tc.moved)
			}
		})
	}
}

// movedBy parks pod, which the plugin rejected, in a real queue with the
// plugin's registrations, delivers the event and reports whether the pod
// was moved.
func movedBy(t *testing.T, pod *corev1.Pod, ev framework.ClusterEvent, oldObj, newObj any) bool {
	t.Helper()
	q := queue.New(queue.Options{
		InitialBackoff: time.Second, MaxBackoff: time.Second,
		Events: map[string][]framework.ClusterEventWithHint{dynamicresources.Name: dynamicresources.New().EventsToRegister()},
	})
	q.Add(pod)
	qp, err := q.Pop()
	if err != nil {
		t.Fatal(err)
	}
	q.Unschedulable(qp, []string{dynamicresources.Name}, true)
	if got := q.Where(pod.UID); got != queue.Unschedulable {
		t.Fatalf("after the attempt the pod is %q, want parked", got)
	}
	q.OnEvent(ev, oldObj, newObj)
	return q.Where(pod.UID) != queue.Unschedulable
}

// TestV1ClaimEventsMovePodsTheyCanHelp: the same rules for
// resource.k8s.io/v1 claim events, for a pod parked on a v1 claim (test/e2e
// TestUpstreamDriver's pod pair): another claim's deallocation or
// deletion while allocated moves it; that claim's creation, allocation or
// dropped reservation does not.
func TestV1ClaimEventsMovePodsTheyCanHelp(t *testing.T) {
	shared := v1Claim("shared")
	allocatedV1 := v1OnGPU("shared", "n1", "gpu-0", "")
	allocatedV1.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "s1", UID: "uid-s1"}}
	released := allocatedV1.DeepCopy()
	released.Status.ReservedFor = nil
	ev := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.ResourceClaimV1, ActionType: a}
	}
	for name, tc := range map[string]struct {
		ev       framework.ClusterEvent
		old, new *resourcev1.ResourceClaim
		moved    bool
	}{
		"own claim allocated":               {ev: ev(framework.Update), old: v1Claim("pair"), new: v1OnGPU("pair", "n1", "gpu-1", ""), moved: true},
		"other claim deallocated":           {ev: ev(framework.Update), old: released, new: shared, moved: true},
		"other allocated claim deleted":     {ev: ev(framework.Delete), old: allocatedV1, moved: true},
		"other claim created":               {ev: ev(framework.Add), new: shared},
		"other claim allocated":             {ev: ev(framework.Update), old: shared, new: allocatedV1},
		"other claim's reservation dropped": {ev: ev(framework.Update), old: allocatedV1, new: released},
	} {
		t.Run(name, func(t *testing.T) {
			pod := podUsing("p", "pair")
			q := queue.New(queue.Options{
				InitialBackoff: time.Second, MaxBackoff: time.Second,
				Events: map[string][]framework.ClusterEventWithHint{dynamicresources.Name: dynamicresources.New().EventsToRegister()},
			})
			q.Add(pod)
			qp, err := q.Pop()
			if err != nil {
				t.Fatal(err)
			}
			q.Unschedulable(qp, []string{dynamicresources.Name}, true)
			var oldObj, newObj any
			if tc.old != nil {
				oldObj = tc.old
			}
			if tc.new != nil {
				newObj = tc.new
			}
			q.OnEvent(tc.ev, oldObj, newObj)
			if moved := q.Where(pod.UID) != queue.Unschedulable; moved != tc.moved {
				t.Fatalf("%s moved the pod: %v, want %v", tc.ev, moved, tc.moved)
			}
		})
	}
}
