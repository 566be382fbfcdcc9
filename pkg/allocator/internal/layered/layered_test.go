package layered

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
	t.Run("large", func(t *testing.T) { testLayeredMatchesMap(t, 500, 700, 8) })
	// Few keys, mostly outside the base: deltas often empty again (set,
	// then deleted), the case a fork must not share.
	t.Run("small", func(t *testing.T) { testLayeredMatchesMap(t, 1, 4, 3) })
}

// testLayeredMatchesMap runs TestLayeredMatchesMap over a base of
// baseKeys keys, writing up to perStep of keys 0..keys-1 per step.
func testLayeredMatchesMap(t *testing.T, baseKeys, keys, perStep int) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := map[string]int{}
	for i := range baseKeys {
		start[strconv.Itoa(i)] = i
	}
	type version struct {
		l    *Map[string, int]
		want map[string]int
		// forked: a version was derived from l (layered.derived), so l
		// must not be written in place any more.
		forked bool
	}
	versions := []*version{{l: New(maps.Clone(start)), want: start}}
	for step := range 2000 {
		from := versions[rng.IntN(len(versions))]
		set := map[string]int{}
		var del []string
		for range 1 + rng.IntN(perStep) {
			k := strconv.Itoa(rng.IntN(keys))
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
		var l *Map[string, int]
		switch op := rng.IntN(4); {
		case op == 0: // a derived version
			l = from.l.With(set, del)
		case op == 1: // a clone written in place
			l = from.l.Clone()
			applyLayered(l, set, del)
		case op == 2: // a version for writing in place, its source kept as it is
			l = from.l.Derived()
			from.forked = true
			applyLayered(l, set, del)
		case !from.forked: // the version itself written in place, after a clone that keeps its old state
			old := from.l.Clone()
			l = from.l
			applyLayered(l, set, del)
			for _, v := range versions {
				if v.l == from.l {
					v.l = old
				}
			}
		default:
			continue
		}
		checkLayered(t, step, l, want)
		versions = append(versions, &version{l: l, want: want})
	}
	for i, v := range versions {
		checkLayered(t, -i, v.l, v.want)
	}
}

func applyLayered(l *Map[string, int], set map[string]int, del []string) {
	for k, v := range set {
		l.Set(k, v)
	}
	for _, k := range del {
		l.Del(k)
	}
}

func checkLayered(t *testing.T, step int, l *Map[string, int], want map[string]int) {
	t.Helper()
	if l.Len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, l.Len(), len(want))
	}
	got := map[string]int{}
	l.Each(func(k string, v int) { got[k] = v })
	if !maps.Equal(got, want) {
		t.Fatalf("step %d: each gives %d keys, want %d", step, len(got), len(want))
	}
	if keys := l.Keys(); !slices.IsSorted(keys) || len(keys) != len(want) {
		t.Fatalf("step %d: keys not sorted or %d of them, want %d", step, len(keys), len(want))
	}
	for k, v := range want {
		if g, ok := l.Get(k); !ok || g != v {
			t.Fatalf("step %d: get(%s) = %d, %v; want %d", step, k, g, ok, v)
		}
	}
	for _, k := range []string{"x", "-1"} {
		if _, ok := l.Get(k); ok {
			t.Fatalf("step %d: get(%s) found a key never set", step, k)
		}
	}
}

// TestLayeredEmptiedDeltaIsNotShared: a version whose own part emptied
// again (a key set, then deleted) still holds its delta map; a clone or a
// derived version must not write into it. (A derived State once did:
// a cycle's in-memory allocation landed in the scheduler's base state,
// whose device stayed in use after its claim was deallocated.)
func TestLayeredEmptiedDeltaIsNotShared(t *testing.T) {
	for name, fork := range map[string]func(*Map[string, int]) *Map[string, int]{
		"clone":   (*Map[string, int]).Clone,
		"derived": (*Map[string, int]).Derived,
	} {
		t.Run(name, func(t *testing.T) {
			l := New(map[string]int{"a": 1})
			l.Set("b", 2)
			l.Del("b")
			f := fork(l)
			f.Set("c", 3)
			if _, ok := l.Get("c"); ok || l.Len() != 1 {
				t.Errorf("the source sees its fork's write: get(c) %v, len %d, want absent and 1", ok, l.Len())
			}
			if v, ok := f.Get("c"); !ok || v != 3 || f.Len() != 2 {
				t.Errorf("the fork: get(c) = %d, %v, len %d; want 3, true, 2", v, ok, f.Len())
			}
		})
	}
}

// TestFillingMatchesMap fills a map from NewFilling at random (sets and
// deletes) and compares it with a plain map, before and after Fold; the
// versions derived from it after Fold leave it as it was.
func TestFillingMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l, want := NewFilling[int, int](), map[int]int{}
	check := func(what string, l *Map[int, int], want map[int]int) {
		t.Helper()
		if l.Len() != len(want) {
			t.Fatalf("%s: %d keys, want %d", what, l.Len(), len(want))
		}
		for k, v := range want {
			if got, ok := l.Get(k); !ok || got != v {
				t.Fatalf("%s: key %d = %d, %v; want %d", what, k, got, ok, v)
			}
		}
		l.Each(func(k, v int) {
			if w, ok := want[k]; !ok || w != v {
				t.Fatalf("%s: key %d = %d present, want %d, %v", what, k, v, w, ok)
			}
		})
	}
	for i := range 3000 {
		k := rng.IntN(1000)
		if rng.IntN(4) == 0 {
			l.Del(k)
			delete(want, k)
		} else {
			l.Set(k, i)
			want[k] = i
		}
	}
	check("filled", l, want)
	l.Fold()
	check("folded", l, want)
	d := l.Derived()
	d.Set(-1, 1)
	d.Del(rng.IntN(1000))
	w := l.With(map[int]int{-2: 2}, []int{rng.IntN(1000)})
	check("after deriving", l, want)
	if _, ok := d.Get(-1); !ok {
		t.Fatal("the derived version lost its own key")
	}
	if _, ok := w.Get(-2); !ok {
		t.Fatal("the with version lost its own key")
	}
	c := NewFilling[int, int]()
	c.Set(1, 1)
	cl := c.Clone()
	c.Set(2, 2)
	cl.Set(3, 3)
	check("filling, then cloned", c, map[int]int{1: 1, 2: 2})
	check("its clone", cl, map[int]int{1: 1, 3: 3})
}
