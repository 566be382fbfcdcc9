package allocator

import (
	"cmp"
	"slices"
)

// layered is a copy-on-write map: a private top layer over a chain of
// frozen layers shared with clones. clone is O(1); reads walk the chain,
// which is flattened once it grows deeper than maxLayers, so the cost of
// reads stays bounded and the cost of flattening is spread over many clones.
type layered[K cmp.Ordered, V any] struct {
	top    map[K]entry[V]
	parent *frozen[K, V]
}

type entry[V any] struct {
	val     V
	deleted bool
}

type frozen[K cmp.Ordered, V any] struct {
	m      map[K]entry[V]
	parent *frozen[K, V]
	depth  int
}

const maxLayers = 8

func newLayered[K cmp.Ordered, V any]() *layered[K, V] {
	return &layered[K, V]{top: map[K]entry[V]{}}
}

func (l *layered[K, V]) get(k K) (V, bool) {
	if e, ok := l.top[k]; ok {
		return e.val, !e.deleted
	}
	for f := l.parent; f != nil; f = f.parent {
		if e, ok := f.m[k]; ok {
			return e.val, !e.deleted
		}
	}
	var zero V
	return zero, false
}

func (l *layered[K, V]) set(k K, v V) { l.top[k] = entry[V]{val: v} }

func (l *layered[K, V]) del(k K) {
	if l.parent == nil {
		delete(l.top, k)
		return
	}
	l.top[k] = entry[V]{deleted: true}
}

// clone freezes the current top layer and returns a map that shares it;
// both the receiver and the clone write to fresh top layers from now on.
func (l *layered[K, V]) clone() *layered[K, V] {
	if len(l.top) > 0 {
		depth := 1
		if l.parent != nil {
			depth = l.parent.depth + 1
		}
		l.parent = &frozen[K, V]{m: l.top, parent: l.parent, depth: depth}
		l.top = map[K]entry[V]{}
		if depth > maxLayers {
			l.parent = &frozen[K, V]{m: l.flatten(), depth: 1}
		}
	}
	return &layered[K, V]{top: map[K]entry[V]{}, parent: l.parent}
}

// flatten merges all layers into one map without deleted entries.
func (l *layered[K, V]) flatten() map[K]entry[V] {
	var chain []map[K]entry[V]
	for f := l.parent; f != nil; f = f.parent {
		chain = append(chain, f.m)
	}
	out := map[K]entry[V]{}
	for i := len(chain) - 1; i >= 0; i-- {
		for k, e := range chain[i] {
			if e.deleted {
				delete(out, k)
			} else {
				out[k] = e
			}
		}
	}
	for k, e := range l.top {
		if e.deleted {
			delete(out, k)
		} else {
			out[k] = e
		}
	}
	return out
}

// keys returns the live keys in ascending order.
func (l *layered[K, V]) keys() []K {
	var out []K
	if l.parent == nil {
		for k, e := range l.top {
			if !e.deleted {
				out = append(out, k)
			}
		}
	} else {
		for k := range l.flatten() {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
