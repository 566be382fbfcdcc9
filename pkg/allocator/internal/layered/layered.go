package layered

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// Map is a copy-on-write map with two uses: versions derived with
// with, which leaves its receiver as it was (the scheduler's ClaimSet
// keeps old versions alive and reads them concurrently), and in-place
// writes with O(1) clones (a Simulation). A map is a base, never
// written once a layered holds it and shared between versions, and a
// small delta of the version's own. Once the delta outgrows a share of
// the base it is folded into a new base, so lookups stay one or two map
// reads and a change costs O(1) amortized.
type Map[K cmp.Ordered, V any] struct {
	base  map[K]V
	delta map[K]entry[V] // deleted keys have ok false
	// shared says delta is shared with a clone: the first write copies it.
	shared bool
	// filling: a map from NewFilling before its Fold, written in its base.
	filling bool
	n       int // keys present
}

type entry[V any] struct {
	v  V
	ok bool
}

// The delta is folded into a new base once it holds more than
// max(√(2·base), foldMin) keys. A derived version copies the delta (on
// average half the bound) and a fold copies the base once per bound
// changes; the square root makes the two equal, the least total per
// change (with base/16, a version of a 5,000-key map copied ~156 keys
// per change against ~50 now).
const foldMin = 64

// foldAt is the delta size past which a map over base keys folds.
func foldAt(base int) int { return max(int(math.Sqrt(float64(2*base))), foldMin) }

// New returns a map over m, which it takes: m must not be
// modified afterwards.
func New[K cmp.Ordered, V any](m map[K]V) *Map[K, V] {
	return &Map[K, V]{base: m, n: len(m)}
}

// NewFilling returns an empty map to fill in place before anyone else
// reads it: Set and Del write straight into its base (no delta, no
// folds: filling n keys costs n writes, where New's map folds its
// growing delta O(√n) times), until Fold, after which it is a map like
// New's. Derive nothing from it (Derived, Clone, With) before Fold.
func NewFilling[K cmp.Ordered, V any]() *Map[K, V] {
	return &Map[K, V]{base: map[K]V{}, filling: true}
}

func (l *Map[K, V]) Get(k K) (V, bool) {
	if e, ok := l.delta[k]; ok {
		return e.v, e.ok
	}
	v, ok := l.base[k]
	return v, ok
}

func (l *Map[K, V]) Len() int { return l.n }

// Each calls fn for every key present, in no particular order.
func (l *Map[K, V]) Each(fn func(k K, v V)) {
	for k, v := range l.base {
		if _, over := l.delta[k]; !over {
			fn(k, v)
		}
	}
	for k, e := range l.delta {
		if e.ok {
			fn(k, e.v)
		}
	}
}

// Keys returns the keys present in ascending order.
func (l *Map[K, V]) Keys() []K {
	out := make([]K, 0, l.n)
	l.Each(func(k K, _ V) { out = append(out, k) })
	slices.Sort(out)
	return out
}

// Clone returns an independent copy in O(1): both maps copy the shared
// delta on their next write. A delta map is shared even when it is empty
// (its keys set, then deleted): a write into it would show in both.
func (l *Map[K, V]) Clone() *Map[K, V] {
	if l.delta != nil {
		l.shared = true
	}
	l.filling = false // both write deltas from now on
	out := *l
	return &out
}

func (l *Map[K, V]) Set(k K, v V) { l.put(k, entry[V]{v: v, ok: true}) }

func (l *Map[K, V]) Del(k K) { l.put(k, entry[V]{}) }

// put writes one key in place and folds the delta when it is too large.
func (l *Map[K, V]) put(k K, e entry[V]) {
	if l.filling {
		_, had := l.base[k]
		switch {
		case e.ok && !had:
			l.n++
		case !e.ok && had:
			l.n--
		}
		if e.ok {
			l.base[k] = e.v
		} else {
			delete(l.base, k)
		}
		return
	}
	if l.shared || l.delta == nil {
		l.delta = maps.Clone(l.delta)
		if l.delta == nil {
			l.delta = map[K]entry[V]{}
		}
		l.shared = false
	}
	_, had := l.Get(k)
	switch {
	case had && !e.ok:
		l.n--
	case !had && e.ok:
		l.n++
	}
	if _, inBase := l.base[k]; !e.ok && !inBase {
		delete(l.delta, k) // nothing to hide
	} else {
		l.delta[k] = e
	}
	if len(l.delta) > foldAt(len(l.base)) {
		l.Fold()
	}
}

// Fold merges the delta into a new base; a map from NewFilling stops
// filling, keeping its base.
func (l *Map[K, V]) Fold() {
	if l.filling {
		l.filling = false
		return
	}
	flat := make(map[K]V, l.n)
	l.Each(func(k K, v V) { flat[k] = v })
	*l = Map[K, V]{base: flat, n: len(flat)}
}

// Derived returns a version to write in place in O(1), leaving l as it
// is: it copies l's delta on its first write. For maps that are never
// written again once another version is derived from them (the engine's State).
func (l *Map[K, V]) Derived() *Map[K, V] {
	return &Map[K, V]{base: l.base, delta: l.delta, n: l.n, shared: l.delta != nil}
}

// With returns the version with set's keys set and del's keys removed
// (del wins over set); l is unchanged, and may be read meanwhile.
func (l *Map[K, V]) With(set map[K]V, del []K) *Map[K, V] {
	out := &Map[K, V]{base: l.base, n: l.n,
		delta: make(map[K]entry[V], len(l.delta)+len(set)+len(del))}
	maps.Copy(out.delta, l.delta)
	for k, v := range set {
		out.Set(k, v)
	}
	for _, k := range del {
		out.Del(k)
	}
	return out
}
