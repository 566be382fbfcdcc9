package storage

import (
	"slices"
	"sort"
	"strings"
)

// objectIndex holds the cached objects by key and in key order. The order
// is maintained lazily: creations are appended to added and deletions only
// leave the map, and merge restores a clean sorted slice before a List.
// Updates modify objects in place, so they never dirty the order.
type objectIndex struct {
	byKey     map[string]*CachedObject
	sorted    []*CachedObject // key order; may hold deleted or replaced objects while dirty
	added     []*CachedObject // created since the last merge, unsorted
	deletions int             // deletions since the last merge
}

func newObjectIndex() objectIndex {
	return objectIndex{byKey: make(map[string]*CachedObject)}
}

// appendSorted adds an object whose key is greater than every key so far
// (the initial list arrives in key order).
func (x *objectIndex) appendSorted(o *CachedObject) {
	x.byKey[o.Key] = o
	x.sorted = append(x.sorted, o)
}

// upsert stores obj and returns a copy of the previous state, or nil.
func (x *objectIndex) upsert(obj CachedObject) *CachedObject {
	if cur, ok := x.byKey[obj.Key]; ok {
		prev := *cur
		*cur = obj
		return &prev
	}
	o := new(CachedObject)
	*o = obj
	x.byKey[obj.Key] = o
	x.added = append(x.added, o)
	x.maybeMerge()
	return nil
}

// remove deletes key and returns its last state, or nil.
func (x *objectIndex) remove(key string) *CachedObject {
	cur, ok := x.byKey[key]
	if !ok {
		return nil
	}
	delete(x.byKey, key)
	x.deletions++
	x.maybeMerge()
	return cur
}

// maybeMerge merges once pending changes are a sizeable fraction of the
// index, so that churn without Lists cannot grow added (and keep deleted
// objects alive) without bound; the cost is amortized over the changes.
func (x *objectIndex) maybeMerge() {
	if p := len(x.added) + x.deletions; p > 1024 && p > len(x.sorted)/4 {
		x.merge()
	}
}

func (x *objectIndex) dirty() bool { return len(x.added) > 0 || x.deletions > 0 }

// merge folds added objects into sorted and drops deleted ones.
func (x *objectIndex) merge() {
	if !x.dirty() {
		return
	}
	live := func(o *CachedObject) bool { return x.byKey[o.Key] == o }
	slices.SortFunc(x.added, func(a, b *CachedObject) int { return strings.Compare(a.Key, b.Key) })
	out := make([]*CachedObject, 0, len(x.byKey))
	i, j := 0, 0
	for i < len(x.sorted) || j < len(x.added) {
		var o *CachedObject
		if j >= len(x.added) || (i < len(x.sorted) && x.sorted[i].Key < x.added[j].Key) {
			o, i = x.sorted[i], i+1
		} else {
			o, j = x.added[j], j+1
		}
		if x.deletions > 0 && !live(o) { // deleted, or replaced after a re-create
			continue
		}
		out = append(out, o)
	}
	x.sorted, x.added, x.deletions = out, nil, 0
}

// collect copies the objects under keyPrefix that match pred, in key
// order. The index must be merged.
func (x *objectIndex) collect(keyPrefix string, pred Predicate) []CachedObject {
	start := sort.Search(len(x.sorted), func(i int) bool { return x.sorted[i].Key >= keyPrefix })
	n := sort.Search(len(x.sorted)-start, func(i int) bool { return !strings.HasPrefix(x.sorted[start+i].Key, keyPrefix) })
	in := x.sorted[start : start+n]
	if pred == nil {
		out := make([]CachedObject, len(in))
		for i, o := range in {
			out[i] = *o
		}
		return out
	}
	var out []CachedObject
	for _, o := range in {
		if pred(o.Decoded) {
			out = append(out, *o)
		}
	}
	return out
}

// eventRing is a fixed-size ring of the most recent events.
type eventRing struct {
	buf   []*cacheEvent
	start int // index of the oldest event
	n     int
	// base is the revision from which a watch can be replayed: every
	// event with a greater revision is still buffered.
	base int64
}

func newEventRing(size int) eventRing { return eventRing{buf: make([]*cacheEvent, size)} }

func (r *eventRing) reset(rev int64) {
	clear(r.buf)
	r.start, r.n, r.base = 0, 0, rev
}

func (r *eventRing) push(ev *cacheEvent) {
	if r.n == len(r.buf) {
		r.base = r.buf[r.start].rev
		r.buf[r.start] = ev
		r.start = (r.start + 1) % len(r.buf)
		return
	}
	r.buf[(r.start+r.n)%len(r.buf)] = ev
	r.n++
}

// since calls fn for every buffered event with revision > rev, oldest
// first.
func (r *eventRing) since(rev int64, fn func(*cacheEvent)) {
	for i := 0; i < r.n; i++ {
		ev := r.buf[(r.start+i)%len(r.buf)]
		if ev.rev > rev {
			fn(ev)
		}
	}
}
