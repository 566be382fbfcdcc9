package scheduler

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

func TestDRAState(t *testing.T) {
	structuredClass := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, DriverName: testDriver}
	cpClass := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, DriverName: "f", ControllerName: "f"}
	vendorRef := func(name string) *resourceapi.ResourceClaimParametersReference {
		return &resourceapi.ResourceClaimParametersReference{APIGroup: "gpu.example.com", Kind: "GPUClaimParameters", Name: name}
	}
	claimWith := func(name, class string, ref *resourceapi.ResourceClaimParametersReference) *resourceapi.ResourceClaim {
		c := newClaim(name, "")
		c.Spec.ResourceClassName, c.Spec.ParametersRef = class, ref
		return c
	}
	allocated := func(c *resourceapi.ResourceClaim, controller string, structured bool) *resourceapi.ResourceClaim {
		h := resourceapi.ResourceHandle{DriverName: testDriver, Data: "opaque"}
		if structured {
			h.StructuredData = &resourceapi.StructuredResourceHandle{NodeName: "n"}
		}
		c.Status.ControllerName = controller
		c.Status.Allocation = &resourceapi.AllocationResult{ResourceHandles: []resourceapi.ResourceHandle{h}}
		return c
	}
	generated := &resourceapi.ResourceClaimParameters{
		ObjectMeta:    metav1.ObjectMeta{Name: "gen-a", Namespace: "default"},
		GeneratedFrom: vendorRef("a"),
	}
	small := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "default"}}
	tests := map[string]struct {
		claims []*resourceapi.ResourceClaim
		want   draGauges
	}{
		"nothing": {want: draGauges{structuredClasses: 1}},
		"direct reference resolves": {
			claims: []*resourceapi.ResourceClaim{newClaim("c", "small")},
			want:   draGauges{structuredClasses: 1, resolvedTypes: 1},
		},
		"direct reference to a missing object": {
			claims: []*resourceapi.ResourceClaim{newClaim("c", "small"), newClaim("d", "missing")},
			want:   draGauges{structuredClasses: 1, unresolvedTypes: 1},
		},
		"direct reference with group \"\" resolves by name, as the allocator resolves it": {
			claims: []*resourceapi.ResourceClaim{
				claimWith("c", "gpu", &resourceapi.ResourceClaimParametersReference{Kind: "ResourceClaimParameters", Name: "small"}),
				claimWith("d", "gpu", &resourceapi.ResourceClaimParametersReference{Kind: "ResourceClaimParameters", Name: "gen-a"}),
			},
			want: draGauges{structuredClasses: 1, resolvedTypes: 1},
		},
		"direct reference with group \"\" to a missing object": {
			claims: []*resourceapi.ResourceClaim{
				claimWith("c", "gpu", &resourceapi.ResourceClaimParametersReference{Kind: "ResourceClaimParameters", Name: "missing"}),
			},
			want: draGauges{structuredClasses: 1, unresolvedTypes: 1},
		},
		"vendor reference through generatedFrom": {
			claims: []*resourceapi.ResourceClaim{claimWith("c", "gpu", vendorRef("a")), newClaim("d", "small")},
			want:   draGauges{structuredClasses: 1, resolvedTypes: 2},
		},
		"vendor reference nothing was generated from": {
			claims: []*resourceapi.ResourceClaim{claimWith("c", "gpu", vendorRef("b"))},
			want:   draGauges{structuredClasses: 1, unresolvedTypes: 1},
		},
		"control-plane classes' parameters are not counted": {
			claims: []*resourceapi.ResourceClaim{claimWith("c", "fabric", vendorRef("b"))},
			want:   draGauges{structuredClasses: 1},
		},
		"only structured allocations count": {
			claims: []*resourceapi.ResourceClaim{
				allocated(newClaim("a", "small"), "", true),
				allocated(claimWith("b", "fabric", nil), "f", false),
				allocated(claimWith("c", "fabric", nil), "", false),
				newClaim("d", "small"),
			},
			want: draGauges{structuredClasses: 1, resolvedTypes: 1, allocatedClaims: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := draState([]*resourceapi.ResourceClass{structuredClass, cpClass}, tc.claims,
				[]*resourceapi.ResourceClaimParameters{generated, small})
			if got != tc.want {
				t.Errorf("draState = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPendingByReason(t *testing.T) {
	scheduled := func(b interface{ Obj() *corev1.Pod }, typ corev1.PodConditionType, reason string) *corev1.Pod {
		p := b.Obj()
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionFalse, Reason: reason})
		return p
	}
	pods := []*corev1.Pod{
		makePod("new").Obj(),
		scheduled(makePod("full"), corev1.PodScheduled, corev1.PodReasonUnschedulable),
		scheduled(makePod("broken"), corev1.PodScheduled, ReasonSchedulerError),
		scheduled(makePod("placed").Node("n"), corev1.PodResourceClaimsAllocated, ReasonUnallocatable),
		makePod("running").Node("n").Obj(),
		makePod("other").SchedulerName("else").Obj(),
		makePod("done").Phase(corev1.PodSucceeded).Obj(),
		makePod("going").Terminating().Obj(),
	}
	got := pendingByReason("default-scheduler", pods)
	want := map[string]int{ReasonUnattempted: 1, corev1.PodReasonUnschedulable: 1, ReasonSchedulerError: 1, ReasonUnallocatable: 1}
	if !maps.Equal(got, want) {
		t.Errorf("pendingByReason = %v, want %v", got, want)
	}
	if got := pendingByReason("default-scheduler", nil); len(got) != len(want) || got[ReasonUnattempted] != 0 {
		t.Errorf("pendingByReason of no pods = %v, want every reason at zero", got)
	}
}

// A binding that allocates a claim counts it; one that only reserves an
// allocated claim does not.
func TestClaimsAllocatedCounter(t *testing.T) {
	f := start(t, Config{}, withDRA)
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "4").Obj())
	f.dra.add(t, f.s, draWorld()...)
	f.dra.add(t, f.s, gpuSlice(t, "n", "8Gi"), newClaim("c", "small"))
	f.addPod(makePod("first").Claim("gpu", "c").Obj())
	f.waitReserved(t, "c", "n", "first")
	if got := counterValue(t, f.s.metrics.claimsAllocated); got != 1 {
		t.Fatalf("claims allocated = %v after the first binding, want 1", got)
	}
	old, _ := f.dra.claim("default", "c")
	released := old.DeepCopy()
	released.Status.ReservedFor = nil
	released.ResourceVersion = "1000"
	f.dra.update(t, f.s, old, released)
	f.addPod(makePod("second").Claim("gpu", "c").Obj())
	f.waitReserved(t, "c", "n", "second")
	if got := counterValue(t, f.s.metrics.claimsAllocated); got != 1 {
		t.Errorf("claims allocated = %v after a reservation, want still 1", got)
	}
}
