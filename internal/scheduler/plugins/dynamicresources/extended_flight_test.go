package dynamicresources_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// Pods asking for example.com/gpu (class gpu-v1's extendedResourceName)
// on n1, which has two GPUs and no device plugin: the claims built for
// pods in flight hold their devices in memory, before they are created
// and, once created and bound, until the objects show them; a refused
// binding (Unreserve) gives them back. The binding carries the claim,
// its allocation and the pod's extendedResourceClaimStatus, under the
// created name once the scheduler created it.
func TestExtendedClaimsInFlight(t *testing.T) {
	ctx := context.Background()
	// A v1 claim in the cluster brings the seed GPUs into the v1
	// inventory (v1Inventory.seedless).
	l := mixedLists(t, nil, v1Claim("unused"))
	ern := "example.com/gpu"
	l.DeviceClasses[0].Spec.ExtendedResourceName = &ern
	snap := snapshotOf(l, "n1")
	p := dynamicresources.New()
	gpuPod := func(name string) *corev1.Pod {
		pod := schedtest.MakePod(name).Req(ern, "1").Limit(ern, "1").Obj()
		pod.UID = types.UID("uid-" + name)
		return pod
	}
	var states []*framework.CycleState
	for _, name := range []string{"a", "b"} {
		state, st := cycle(t, p, snap, gpuPod(name))
		if !st.IsSuccess() {
			t.Fatalf("pod %s: %v", name, st.Message())
		}
		if st := p.Reserve(ctx, state, gpuPod(name), "n1"); !st.IsSuccess() {
			t.Fatal(st.Message())
		}
		states = append(states, state)
	}
	if _, st := cycle(t, p, snap, gpuPod("c")); st.Code() != framework.Unschedulable ||
		!strings.Contains(st.Message(), "example.com/gpu: served by DRA class gpu-v1") {
		t.Fatalf("third pod with both GPUs in flight: %s %q, want Unschedulable naming the class", st.Code(), st.Message())
	}

	// Pod a's binding: the claim is created, named in the Binding, bound.
	b := &corev1.Binding{}
	if st := p.ContributeBinding(ctx, states[0], gpuPod("a"), "n1", b); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	c := p.ClaimToCreate(states[0])
	if c == nil || c.Name != "" || c.GenerateName != "a-extended-resources-" || len(c.Spec.Devices.Requests) != 1 {
		t.Fatalf("claim to create: %+v", c)
	}
	created := c.DeepCopy()
	created.Name, created.ResourceVersion = "a-extended-resources-x1", "9"
	if err := p.ClaimCreated(states[0], b, created); err != nil {
		t.Fatal(err)
	}
	if len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Name != created.Name || b.ResourceClaims[0].ResourceVersion != "9" ||
		b.ResourceClaims[0].Allocation == nil || b.ExtendedResourceClaimStatus == nil ||
		b.ExtendedResourceClaimStatus.ResourceClaimName != created.Name ||
		b.ExtendedResourceClaimStatus.RequestMappings[0] != (corev1.ContainerExtendedResourceRequest{ContainerName: "c", ResourceName: ern, RequestName: "container-0-request-0"}) {
		t.Fatalf("binding = %+v, extended status %+v", b.ResourceClaims, b.ExtendedResourceClaimStatus)
	}
	p.PostBind(ctx, states[0], gpuPod("a"), "n1", "10")
	if _, st := cycle(t, p, snap, gpuPod("c")); st.Code() != framework.Unschedulable {
		t.Fatalf("after a's binding, before the objects show its claim: %s %q, want Unschedulable", st.Code(), st.Message())
	}
	// Pod b's binding is refused: its GPU is free again.
	p.Unreserve(ctx, states[1], gpuPod("b"), "n1")
	if _, st := cycle(t, p, snap, gpuPod("c")); !st.IsSuccess() {
		t.Fatalf("after b's Unreserve: %q", st.Message())
	}
}
