package allocator

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// TestCheckV1BuildsWhatAllocateV1Gives: on random cases (both APIs'
// devices, shared counters, firstAvailable, constraints), CheckV1 answers
// as AllocateV1 but for the allocations, which its Build gives, equal to
// AllocateV1's and new on each call.
func TestCheckV1BuildsWhatAllocateV1Gives(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	node := v1tNode("node-a")
	ctx := context.Background()
	fits := 0
	for round := range 150 {
		withSeed := rng.IntN(2) == 0
		slices_, claims, classes := v1tRandomCase(rng, 3+rng.IntN(6), withSeed)
		if round%3 == 2 {
			slices_ = v1tRandomGPUs(rng)
		}
		var seed []*resourceapi.NodeResourceSlice
		if withSeed {
			seed = []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 1+rng.IntN(2))}
		}
		st := NewState(NewInventory(slices_, seed), nil, nil)
		req := PrepareV1(&corev1.Pod{}, claims, v1tClassFunc(classes))
		want, err := AllocateV1(ctx, req, st, node)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CheckV1(ctx, req, st, node)
		if err != nil {
			t.Fatal(err)
		}
		if got.Fits != want.Fits || got.Score != want.Score || !reflect.DeepEqual(got.Reasons, want.Reasons) {
			t.Fatalf("round %d: CheckV1 %v %d %v, AllocateV1 %v %d %v", round, got.Fits, got.Score, got.Reasons, want.Fits, want.Score, want.Reasons)
		}
		if !slicesAllNil(got.Allocations) {
			t.Fatalf("round %d: CheckV1 wrote allocations down", round)
		}
		built := got.Build()
		if !reflect.DeepEqual(built, want.Allocations) {
			t.Fatalf("round %d: Build\n%+v\nAllocateV1\n%+v", round, built, want.Allocations)
		}
		if !reflect.DeepEqual(want.Build(), want.Allocations) {
			t.Fatalf("round %d: Build of AllocateV1's answer is not its allocations", round)
		}
		for i, a := range got.Build() {
			if a != nil && a == built[i] {
				t.Fatalf("round %d: Build returned the same object twice", round)
			}
		}
		if got.Fits {
			fits++
		}
	}
	if fits < 30 {
		t.Fatalf("only %d of the cases fit: the test says little", fits)
	}
}

func slicesAllNil[T any](s []*T) bool {
	for _, x := range s {
		if x != nil {
			return false
		}
	}
	return true
}

// TestCheckV1ForBuildsTheOtherRequestsAllocations: a CheckV1 answer taken
// For another request of the same Signature builds that request's
// allocations (its claim's config and share IDs), as AllocateV1 gives
// them to it.
func TestCheckV1ForBuildsTheOtherRequestsAllocations(t *testing.T) {
	f := newV1ReuseFixture()
	one, two := f.request("p1", f.claim("c1", 2)), f.request("p2", f.claim("c2", 2))
	a, err := CheckV1(t.Context(), one, f.st, v1tNode("node-a"))
	if err != nil || !a.Fits {
		t.Fatalf("CheckV1: %v %v", err, a)
	}
	want, mine := f.allocate(t, two), f.allocate(t, one)
	if got := a.For(two).Build(); !reflect.DeepEqual(got, want.Allocations) {
		t.Errorf("built For the second request:\n%+v\nwant\n%+v", got, want.Allocations)
	}
	if got := a.Build(); !reflect.DeepEqual(got, mine.Allocations) {
		t.Errorf("built for its own request:\n%+v\nwant\n%+v", got, mine.Allocations)
	}
	if reflect.DeepEqual(want.Allocations, mine.Allocations) {
		t.Fatal("the two claims' allocations are the same: the test cannot tell them apart")
	}
}
