package allocator

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestLayeredMatchesMap changes versions of a layered map at random, folds
// included, and compares each with a plain map: versions derived by with
// from old versions, and clones written in place, must not see each
// other's changes.
func TestLayeredMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := map[string]int{}
	for i := range 500 {
		start[strconv.Itoa(i)] = i
	}
	type version struct {
		l    *layered[string, int]
		want map[string]int
	}
	versions := []version{{newLayered(maps.Clone(start)), start}}
	for step := range 2000 {
		from := versions[rng.IntN(len(versions))]
		set := map[string]int{}
		var del []string
		for range 1 + rng.IntN(8) {
			k := strconv.Itoa(rng.IntN(700))
			if rng.IntN(3) == 0 {
				del = append(del, k)
			} else {
				set[k] = step*1000 + rng.IntN(1000)
			}
		}
		want := maps.Clone(from.want)
		maps.Copy(want, set)
		for _, k := range del {
			delete(want, k)
		}
		var l *layered[string, int]
		switch rng.IntN(3) {
		case 0: // a derived version
			l = from.l.with(set, del)
		case 1: // a clone written in place
			l = from.l.clone()
			applyLayered(l, set, del)
		default: // the version itself written in place, after a clone that keeps its old state
			old := from.l.clone()
			l = from.l
			applyLayered(l, set, del)
			for i := range versions {
				if versions[i].l == from.l {
					versions[i].l = old
				}
			}
		}
		checkLayered(t, step, l, want)
		versions = append(versions, version{l, want})
	}
	for i, v := range versions {
		checkLayered(t, -i, v.l, v.want)
	}
}

func applyLayered(l *layered[string, int], set map[string]int, del []string) {
	for k, v := range set {
		l.set(k, v)
	}
	for _, k := range del {
		l.del(k)
	}
}

func checkLayered(t *testing.T, step int, l *layered[string, int], want map[string]int) {
	t.Helper()
	if l.len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, l.len(), len(want))
	}
	got := map[string]int{}
	l.each(func(k string, v int) { got[k] = v })
	if !maps.Equal(got, want) {
		t.Fatalf("step %d: each gives %d keys, want %d", step, len(got), len(want))
	}
	if keys := l.keys(); !slices.IsSorted(keys) || len(keys) != len(want) {
		t.Fatalf("step %d: keys not sorted or %d of them, want %d", step, len(keys), len(want))
	}
	for k, v := range want {
		if g, ok := l.get(k); !ok || g != v {
			t.Fatalf("step %d: get(%s) = %d, %v; want %d", step, k, g, ok, v)
		}
	}
	for _, k := range []string{"x", "700", "-1"} {
		if _, ok := l.get(k); ok {
			t.Fatalf("step %d: get(%s) found a key never set", step, k)
		}
	}
}
