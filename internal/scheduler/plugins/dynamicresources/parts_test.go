package dynamicresources_test

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
)

// TestMixedPodGoesThroughOnePath: a pod with a v1alpha2 claim and a v1
// claim is reserved, unreserved, bound and committed through one path
// (parts.go): Reserve holds the claims of both versions in memory, so a
// later pod finds n1's devices of both versions taken; Unreserve frees
// both; the binding lists both, the v1alpha2 claim first, with their
// allocations; PostBind commits both (ClaimsReady trusts them before the
// lookup shows them).
func TestMixedPodGoesThroughOnePath(t *testing.T) {
	ctx := context.Background()
	l := baseLists(t, claim("a", "small"), claim("c", "small"))
	l.DeviceClasses = []*resourcev1.DeviceClass{devClass()}
	l.V1Slices = []*resourcev1.ResourceSlice{devSlice("n1")}
	l.V1Claims = []*resourcev1.ResourceClaim{devClaim("b", 2), devClaim("d", 1)}
	snap := snapshotOf(l, "n1")
	p := dynamicresources.New()
	first, second := podUsing("pod-1", "a", "b"), podUsing("pod-2", "c", "d")

	state, st := cycle(t, p, snap, first)
	if !st.IsSuccess() {
		t.Fatalf("first pod: %s", st.Message())
	}
	if st := p.Reserve(ctx, state, first, "n1"); !st.IsSuccess() {
		t.Fatalf("reserve the first pod: %s", st.Message())
	}
	if _, st := cycle(t, p, snap, second); st.Code() != framework.Unschedulable {
		t.Fatalf("second pod while the first holds both v1 GPUs: %s %q, want Unschedulable", st.Code(), st.Message())
	}
	p.Unreserve(ctx, state, first, "n1")
	if _, st := cycle(t, p, snap, second); !st.IsSuccess() {
		t.Fatalf("second pod after Unreserve: %q", st.Message())
	}

	state, st = cycle(t, p, snap, first)
	if !st.IsSuccess() {
		t.Fatalf("first pod again: %s", st.Message())
	}
	if st := p.Reserve(ctx, state, first, "n1"); !st.IsSuccess() {
		t.Fatalf("reserve the first pod again: %s", st.Message())
	}
	b := &corev1.Binding{}
	if st := p.ContributeBinding(ctx, state, first, "n1", b); !st.IsSuccess() {
		t.Fatalf("contribute the binding: %s", st.Message())
	}
	if len(b.ResourceClaims) != 2 || b.ResourceClaims[0].Name != "a" || b.ResourceClaims[1].Name != "b" {
		t.Fatalf("binding claims = %+v, want a then b", b.ResourceClaims)
	}
	for _, c := range b.ResourceClaims {
		if c.Allocation == nil || c.ResourceVersion != "5" {
			t.Errorf("binding claim %s: allocation %v, resourceVersion %q; want an allocation decided on 5", c.Name, c.Allocation != nil, c.ResourceVersion)
		}
	}
	nothing := func(string, string) (*resourceapi.ResourceClaim, bool) { return nil, false }
	if p.ClaimsReady(first, nothing) {
		t.Fatal("claims ready before the binding was committed")
	}
	p.PostBind(ctx, state, first, "n1", "9")
	if !p.ClaimsReady(first, nothing) {
		t.Fatal("claims of both versions not ready after PostBind")
	}
}
