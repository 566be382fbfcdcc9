package dynamicresources_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

// v1GPUs is a resource.k8s.io/v1 slice of driver's two GPUs on node n1
// (pool n1), as a kubelet plugin publishes them, with class gpu-v1 and
// the v1 claims; no seed slices.
func v1GPUs(claims ...*resourcev1.ResourceClaim) dynamicresources.Lists {
	node := "n1"
	return dynamicresources.Lists{
		V1Slices: []*resourcev1.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node,
				Pool:    resourcev1.ResourcePool{Name: "n1", Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}},
		DeviceClasses: []*resourcev1.DeviceClass{gpuV1Class()},
		V1Claims:      claims,
		Revision:      "7",
	}
}

// v1Pair is a v1 claim for both GPUs, one request each.
func v1Pair(name string) *resourcev1.ResourceClaim {
	c := v1Claim(name)
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, c.Spec.Devices.Requests[0])
	c.Spec.Devices.Requests[1].Name = "second"
	return c
}

// TestV1ClaimDeallocatedBeforeAPodNeedsItsDevice is test/e2e
// TestUpstreamDriver's sequence on the plugin: a v1 claim allocated and
// deleted (so the one device-use state's own part is empty again), a
// claim shared by two pods (the second judged while the first's binding
// is in flight, so its cycle state holds the first's in-memory
// allocation), the shared claim written, then deallocated, then a pod
// that needs both GPUs. It fits: no cycle's in-memory allocation may
// leak into the Objects' base state (it once did, through a delta map a
// derived state shared with its source, and the GPU stayed in use after
// the deallocation), and the state derived event by event equals the
// state counted afresh.
func TestV1ClaimDeallocatedBeforeAPodNeedsItsDevice(t *testing.T) {
	ctx := context.Background()
	p := dynamicresources.New()
	n1 := schedtest.MakeNode("n1").Obj()
	objs := dynamicresources.NewObjects(v1GPUs(v1Claim("a"), v1Claim("shared"), v1Pair("pair")))
	rev := 10
	snap := func() *framework.Snapshot {
		return framework.NewSnapshot([]*corev1.Node{n1}, nil).WithExtension(dynamicresources.Name, objs)
	}
	// event applies claim events as the scheduler's source does.
	event := func(upd map[string]*resourcev1.ResourceClaim) {
		rev++
		objs = objs.WithClaimChanges(fmt.Sprint(rev), dynamicresources.ClaimChanges{V1: upd})
	}
	inUse := func() []string {
		var out []string
		for _, d := range []string{"gpu-0", "gpu-1"} {
			if dynamicresources.V1InUse(objs, driver, "n1", d) {
				out = append(out, d)
			}
		}
		return out
	}
	// bind reserves pod on n1 and records its binding at the next
	// revision; it returns the claim as written.
	bind := func(state *framework.CycleState, pod *corev1.Pod) *resourcev1.ResourceClaim {
		t.Helper()
		if st := p.Reserve(ctx, state, pod, "n1"); !st.IsSuccess() {
			t.Fatalf("reserve %s: %s", pod.Name, st.Message())
		}
		p.PostBind(ctx, state, pod, "n1", fmt.Sprint(rev+1))
		c := dynamicresources.BoundClaimsV1(state)[0].DeepCopy()
		c.ResourceVersion = fmt.Sprint(rev + 1)
		return c
	}
	schedule := func(pod *corev1.Pod) *framework.CycleState {
		t.Helper()
		state, st := cycle(t, p, snap(), pod)
		if !st.IsSuccess() {
			t.Fatalf("%s: %s %q; GPUs in use in the base state: %q", pod.Name, st.Code(), st.Message(), inUse())
		}
		return state
	}

	podA := podUsing("pod-a", "a")
	event(map[string]*resourcev1.ResourceClaim{"default/a": bind(schedule(podA), podA)})
	if got := inUse(); len(got) != 1 {
		t.Fatalf("after a was bound: %q in use, want one GPU", got)
	}
	event(map[string]*resourcev1.ResourceClaim{"default/a": nil})
	if got := inUse(); len(got) != 0 {
		t.Fatalf("after a was deleted: %q in use, want none", got)
	}

	s1, s2 := podUsing("s1", "shared"), podUsing("s2", "shared")
	state1 := schedule(s1)
	if st := p.Reserve(ctx, state1, s1, "n1"); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	state2 := schedule(s2) // s1's allocation is in memory only
	if got := inUse(); len(got) != 0 {
		t.Errorf("a cycle's in-memory allocation shows in the base state: %q in use", got)
	}
	p.PostBind(ctx, state1, s1, "n1", fmt.Sprint(rev+1))
	shared := dynamicresources.BoundClaimsV1(state1)[0].DeepCopy()
	shared.ResourceVersion = fmt.Sprint(rev + 1)
	event(map[string]*resourcev1.ResourceClaim{"default/shared": shared})
	event(map[string]*resourcev1.ResourceClaim{"default/shared": bind(state2, s2)})
	if got := inUse(); len(got) != 1 {
		t.Fatalf("shared bound to s1 and s2: %q in use, want one GPU", got)
	}

	// s1 and s2 are gone; the claim controller deallocates shared.
	freed := v1Claim("shared")
	freed.ResourceVersion = fmt.Sprint(rev + 1)
	event(map[string]*resourcev1.ResourceClaim{"default/shared": freed})
	if got := inUse(); len(got) != 0 {
		t.Errorf("after shared was deallocated: %q in use, want none", got)
	}
	schedule(podUsing("pair", "pair"))

	fresh := dynamicresources.NewObjects(v1GPUs(freed, v1Pair("pair")))
	for _, d := range []string{"gpu-0", "gpu-1"} {
		if got, want := dynamicresources.V1InUse(objs, driver, "n1", d), dynamicresources.V1InUse(fresh, driver, "n1", d); got != want {
			t.Errorf("%s in use %v after the events, %v counted afresh", d, got, want)
		}
	}
}

// TestOneStateFollowsEventsLikeARecount applies random claim events
// (created, allocated, freed, deleted) to a line of Objects, building the
// base state after some of them and not others (pending deltas), and runs
// cycles with another pod's claim held in memory in between (their cycle
// states derive from the base state): after every step the derived state
// counts each GPU as in use exactly when indexing the claims afresh does,
// for the v1 side (V1InUse) and the seed side (the node's seed state).
// Variants: a v1 slice's GPUs with v1 claims; the seed GPUs with claims of
// both versions on them (one device-use state).
func TestOneStateFollowsEventsLikeARecount(t *testing.T) {
	for name, mixed := range map[string]bool{"v1 GPUs": false, "seed GPUs, claims of both versions": true} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/seed %d", name, seed), func(t *testing.T) { testOneStateFollowsEvents(t, mixed, seed) })
		}
	}
}

func testOneStateFollowsEvents(t *testing.T, mixed bool, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 4))
	gpus := []string{"gpu-0", "gpu-1"}
	// The truth, by name: "c-*" are v1 claims, "s-*" v1alpha2 ones.
	v1Claims := map[string]*resourcev1.ResourceClaim{}
	seedClaims := map[string]*resourceapi.ResourceClaim{}
	lists := func() dynamicresources.Lists {
		var l []*resourcev1.ResourceClaim
		for _, c := range v1Claims {
			l = append(l, c)
		}
		if !mixed {
			return v1GPUs(l...)
		}
		var sl []*resourceapi.ResourceClaim
		for _, c := range seedClaims {
			sl = append(sl, c)
		}
		return mixedLists(t, sl, l...)
	}
	held := func(g string) bool {
		for _, c := range v1Claims {
			if c.Status.Allocation != nil && c.Status.Allocation.Devices.Results[0].Device == g {
				return true
			}
		}
		for _, c := range seedClaims {
			if c.Status.Allocation != nil && c.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID == g {
				return true
			}
		}
		return false
	}
	n1 := schedtest.MakeNode("n1").Obj()
	objs := dynamicresources.NewObjects(lists())
	p := dynamicresources.New()
	names := []string{"c-0", "c-1", "c-2", "c-3"}
	if mixed {
		names = append(names, "s-0", "s-1")
	}
	for step := range 400 {
		name := names[rng.IntN(len(names))]
		rev := fmt.Sprint(100 + step)
		free := slices.DeleteFunc(slices.Clone(gpus), held)
		if name[0] == 's' {
			cur, exists := seedClaims[name]
			var next *resourceapi.ResourceClaim
			switch {
			case !exists:
				next = claim(name, "small")
			case cur.Status.Allocation == nil && len(free) > 0 && rng.IntN(2) == 0:
				next = onGPU(claim(name, "small"), "n1", free[rng.IntN(len(free))])
			case cur.Status.Allocation != nil && rng.IntN(2) == 0:
				next = claim(name, "small")
			}
			if next != nil {
				next.ResourceVersion = rev
				seedClaims[name] = next
			} else {
				delete(seedClaims, name)
			}
			objs = objs.WithClaimChanges(rev, dynamicresources.ClaimChanges{Seed: map[string]*resourceapi.ResourceClaim{"default/" + name: next}})
		} else {
			cur, exists := v1Claims[name]
			var next *resourcev1.ResourceClaim
			switch {
			case !exists:
				next = v1Claim(name)
			case cur.Status.Allocation == nil && len(free) > 0 && rng.IntN(2) == 0:
				next = v1OnGPU(name, "n1", free[rng.IntN(len(free))], "")
			case cur.Status.Allocation != nil && rng.IntN(2) == 0:
				next = v1Claim(name) // freed
			}
			if next != nil {
				next.ResourceVersion = rev
				v1Claims[name] = next
			} else {
				delete(v1Claims, name)
			}
			objs = objs.WithClaimChanges(rev, dynamicresources.ClaimChanges{V1: map[string]*resourcev1.ResourceClaim{"default/" + name: next}})
		}
		if rng.IntN(3) == 0 {
			continue // state not built: the next Objects carries a pending delta
		}
		if c, ok := v1Claims["c-3"]; ok && c.Status.Allocation == nil && rng.IntN(2) == 0 {
			// A pod holds c-3 in memory while another pod's cycle runs.
			snap := framework.NewSnapshot([]*corev1.Node{n1}, nil).WithExtension(dynamicresources.Name, objs)
			holder := podUsing("holder", "c-3")
			state := framework.NewCycleState()
			if st := p.PreFilter(ctx, state, holder, snap); st.IsSuccess() {
				ni, _ := snap.Get("n1")
				if p.Filter(ctx, state, holder, ni).IsSuccess() && p.Reserve(ctx, state, holder, "n1").IsSuccess() {
					other := framework.NewCycleState()
					if st := p.PreFilter(ctx, other, podUsing("other", "c-3"), snap); st.IsSuccess() {
						p.Filter(ctx, other, podUsing("other", "c-3"), ni)
					}
					p.Unreserve(ctx, state, holder, "n1")
				}
			}
		}
		fresh := dynamicresources.NewObjects(lists())
		for _, g := range gpus {
			if mixed && len(v1Claims) == 0 {
				// Listed without v1 claims, the inventory leaves the seed
				// slices out (TestSeedOnlyInventory): nothing asks it.
				break
			}
			if got, want := dynamicresources.V1InUse(objs, driver, "n1", g), dynamicresources.V1InUse(fresh, driver, "n1", g); got != want {
				t.Fatalf("step %d (%s): %s in use %v after the events, %v counted afresh", step, name, g, got, want)
			}
		}
		if mixed {
			if got, want := objs.NodeState(n1).Capacity(), fresh.NodeState(n1).Capacity(); got != want {
				t.Fatalf("step %d (%s): n1's seed capacity %d after the events, %d counted afresh", step, name, got, want)
			}
		}
	}
}
