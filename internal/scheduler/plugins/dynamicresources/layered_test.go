package dynamicresources

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestLayeredMatchesMap derives many versions with random changes, folds
// included, and compares each with a plain map; older versions must not
// change.
func TestLayeredMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]int{}
	for i := range 500 {
		want[strconv.Itoa(i)] = i
	}
	cur := newLayered(maps.Clone(want))
	type version struct {
		l    layered[int]
		want map[string]int
	}
	var old []version
	for step := range 400 {
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
		old = append(old, version{cur, maps.Clone(want)})
		cur = cur.with(set, del)
		maps.Copy(want, set)
		for _, k := range del {
			delete(want, k)
		}
		check(t, step, cur, want)
	}
	for i, v := range old {
		check(t, -i, v.l, v.want)
	}
}

func check(t *testing.T, step int, l layered[int], want map[string]int) {
	t.Helper()
	if l.len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, l.len(), len(want))
	}
	got := map[string]int{}
	l.each(func(k string, v int) { got[k] = v })
	if !maps.Equal(got, want) {
		t.Fatalf("step %d: each gives %d keys, want %d", step, len(got), len(want))
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
