package allocator

import (
	"context"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

// TestAllocateV1ArenaReuseKeepsAnswers: AllocateV1 reuses the slices of
// earlier calls (v1arena), so a call must not depend on what an earlier
// one left there. Random cases of different sizes (the generator of
// TestAllocateV1AgainstBruteForce), answered in order, in reverse order
// and from four goroutines at once, give equal results; the results of a
// later call do not change those of an earlier one.
func TestAllocateV1ArenaReuseKeepsAnswers(t *testing.T) {
	type tcase struct {
		st  *State
		req *V1Request
	}
	rng := rand.New(rand.NewPCG(7, 14))
	var cases []tcase
	for round := range 120 {
		withSeed := rng.IntN(2) == 0
		slices_, claims, classes := v1tRandomCase(rng, 3+rng.IntN(6), withSeed)
		if round%3 == 2 {
			slices_ = v1tRandomGPUs(rng)
		}
		var seed []*resourceapi.NodeResourceSlice
		if withSeed {
			seed = []*resourceapi.NodeResourceSlice{v1tSeedNode("node-a", 1+rng.IntN(2))}
		}
		inv := NewInventory(slices_, seed)
		cases = append(cases, tcase{NewState(inv, nil, nil), PrepareV1(&corev1.Pod{}, claims, v1tClassFunc(classes))})
	}
	node := v1tNode("node-a")
	ctx := context.Background()
	answer := func(c tcase) *V1Result {
		res, err := AllocateV1(ctx, c.req, c.st, node)
		if err != nil {
			t.Errorf("AllocateV1: %v", err)
		}
		return res
	}
	inOrder := make([]*V1Result, len(cases))
	for i, c := range cases {
		inOrder[i] = answer(c)
	}
	kept := make([]*V1Result, len(cases))
	for i, c := range cases {
		kept[i] = answer(c)
	}
	fits := 0
	for i := len(cases) - 1; i >= 0; i-- {
		if got := answer(cases[i]); !reflect.DeepEqual(got, inOrder[i]) {
			t.Fatalf("case %d: answered after the later cases %+v, first %+v", i, got, inOrder[i])
		}
		if inOrder[i].Fits {
			fits++
		}
	}
	if fits == 0 || fits == len(cases) {
		t.Fatalf("%d of %d cases fit: the test needs both", fits, len(cases))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range cases {
				i := (k + g*len(cases)/4) % len(cases)
				if got := answer(cases[i]); !reflect.DeepEqual(got, inOrder[i]) {
					t.Errorf("case %d, goroutine %d: %+v, alone %+v", i, g, got, inOrder[i])
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range cases {
		if !reflect.DeepEqual(kept[i], inOrder[i]) {
			t.Fatalf("case %d: the result changed after later calls: %+v, was %+v", i, kept[i], inOrder[i])
		}
	}
}
