package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestObjectIndexMatchesModel drives the lazily sorted index with random
// creates, updates, deletes and re-creates and compares every listing with
// a plain map.
func TestObjectIndexMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	x := newObjectIndex()
	model := map[string]int64{}
	const ops = 10000
	for i := range ops {
		key := fmt.Sprintf("/p/ns%d/k%03d", r.IntN(3), r.IntN(200))
		rev := int64(i + 1)
		if r.IntN(3) == 0 {
			prev := x.remove(key)
			_, had := model[key]
			if (prev != nil) != had {
				t.Fatalf("op %d: remove %s returned %v, model has it: %v", i, key, prev, had)
			}
			delete(model, key)
		} else {
			prev := x.upsert(CachedObject{KV: KV{Key: key, ModRevision: rev}})
			if want, had := model[key]; (prev != nil) != had || (had && prev.ModRevision != want) {
				t.Fatalf("op %d: upsert %s returned prev %v, model %d/%v", i, key, prev, want, had)
			}
			model[key] = rev
		}
		// Check often in the first half; in the second half only
		// maybeMerge folds pending changes, until the final check.
		if (i < ops/2 && r.IntN(50) == 0) || i == ops-1 {
			x.merge()
			for _, sub := range []string{"/p/", "/p/ns1/"} {
				checkListing(t, i, x.collect(sub, nil), model, sub)
			}
		}
	}
}

func checkListing(t *testing.T, op int, got []CachedObject, model map[string]int64, prefix string) {
	t.Helper()
	var want []string
	for k, rev := range model {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			want = append(want, fmt.Sprintf("%s@%d", k, rev))
		}
	}
	slices.Sort(want)
	var have []string
	for _, o := range got {
		have = append(have, fmt.Sprintf("%s@%d", o.Key, o.ModRevision))
	}
	if !slices.Equal(have, want) {
		t.Fatalf("op %d: listing %s\n got %v\nwant %v", op, prefix, have, want)
	}
}

func TestEventRingBase(t *testing.T) {
	r := newEventRing(3)
	r.reset(10)
	for rev := int64(11); rev <= 15; rev++ {
		r.push(&cacheEvent{rev: rev})
	}
	if r.base != 12 {
		t.Fatalf("base %d, want 12 (events 13..15 buffered)", r.base)
	}
	var got []int64
	r.since(13, func(ev *cacheEvent) { got = append(got, ev.rev) })
	if !slices.Equal(got, []int64{14, 15}) {
		t.Fatalf("since(13) = %v", got)
	}
}
