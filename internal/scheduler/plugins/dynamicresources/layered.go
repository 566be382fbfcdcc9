package dynamicresources

import "maps"

// layered is an immutable string-keyed map whose next version, a few keys
// changed, costs the changes rather than a copy of the map: a base shared
// between versions and a small delta of the version's own. Once the delta
// outgrows a share of the base it is folded into a new base, so lookups
// stay one or two map reads and a version costs O(changes) amortized.
// A scheduler at a steady rate of claim events derives one version per
// cycle from thousands of claims.
type layered[V any] struct {
	base  map[string]V
	delta map[string]entry[V] // deleted keys have ok false
	n     int                 // keys present
}

type entry[V any] struct {
	v  V
	ok bool
}

// foldAt is the delta size, as a share of the base (and at least
// foldMin), past which a version folds its delta into a new base.
const (
	foldShare = 16
	foldMin   = 64
)

func newLayered[V any](m map[string]V) layered[V] {
	return layered[V]{base: m, n: len(m)}
}

func (l layered[V]) get(k string) (V, bool) {
	if e, ok := l.delta[k]; ok {
		return e.v, e.ok
	}
	v, ok := l.base[k]
	return v, ok
}

func (l layered[V]) len() int { return l.n }

// each calls fn for every key present, in no particular order.
func (l layered[V]) each(fn func(k string, v V)) {
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

// with returns the version with set's keys set and del's keys removed
// (del wins over set); l is unchanged.
func (l layered[V]) with(set map[string]V, del []string) layered[V] {
	out := layered[V]{base: l.base, delta: make(map[string]entry[V], len(l.delta)+len(set)+len(del)), n: l.n}
	maps.Copy(out.delta, l.delta)
	put := func(k string, e entry[V]) {
		_, had := out.get(k)
		switch {
		case had && !e.ok:
			out.n--
		case !had && e.ok:
			out.n++
		}
		out.delta[k] = e
	}
	for k, v := range set {
		put(k, entry[V]{v: v, ok: true})
	}
	for _, k := range del {
		put(k, entry[V]{})
	}
	if len(out.delta) > max(len(out.base)/foldShare, foldMin) {
		flat := make(map[string]V, out.n)
		out.each(func(k string, v V) { flat[k] = v })
		return newLayered(flat)
	}
	return out
}
