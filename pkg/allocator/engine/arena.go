package engine

import "sync"

// v1arena backs what one AllocateV1 call allocates in proportion to the
// node: its v1prob and the slices of the problem and of its searches. The
// scheduler's filter calls AllocateV1 on every node of every cycle; with
// the arenas kept in v1arenas between calls, a call allocates little
// besides its result, where it allocated its whole problem each time
// (bench/README.md, "Session 14: v1 memory").
//
// An arena belongs to one call: setup takes it, AllocateV1 gives it back
// (v1prob.release) when the answer is built. Nothing carved from it may
// outlive the call: results and reasons are built afresh.
type v1arena struct {
	prob v1prob
	// search is the call's first search (its solve); further ones
	// (combinations of subrequests, explanations) are allocated.
	search     v1search
	searchUsed bool
	pol        polState // the search's under a policy (Table.Search)

	bools    v1slab[bool]
	i32      v1slab[int32]
	u64      v1slab[uint64]
	i64      v1slab[int64]
	ints     v1slab[int]
	uses     v1slab[[]CounterUse]
	edges    v1slab[[]v1edge]
	lists    v1slab[[]int32]
	groups   v1slab[v1lgroup]
	alts     v1slab[v1salt]
	cands    v1slab[v1cand]
	picks    v1slab[v1pick]
	matchers v1slab[*v1matchCache]
}

var v1arenas = sync.Pool{New: func() any { return new(v1arena) }}

// v1arenaKeep is the most elements a slab keeps between calls; a larger
// one (a node with very many devices) is left to the collector.
const v1arenaKeep = 1 << 16

// v1slab hands out zeroed slices of T from one buffer, in order; when the
// buffer is used up it starts a larger one (the slices already handed out
// keep the old one).
type v1slab[T any] struct {
	buf []T
	off int
}

// take returns a zeroed slice of n elements, with capacity n. What was
// handed out before was zeroed by reset.
func (s *v1slab[T]) take(n int) []T {
	if s.off+n > len(s.buf) {
		s.buf, s.off = make([]T, max(2*len(s.buf), n, 64)), 0
	}
	out := s.buf[s.off : s.off+n : s.off+n]
	s.off += n
	return out
}

// room returns an empty slice with capacity n, to append up to n
// elements to; it ends the slab's previous room.
func (s *v1slab[T]) room(n int) []T { return s.take(n)[:0] }

// reset zeroes what was handed out (so that a kept arena points to no
// request or inventory) and starts over.
func (s *v1slab[T]) reset() {
	clear(s.buf[:s.off])
	s.off = 0
	if len(s.buf) > v1arenaKeep {
		s.buf = nil
	}
}

// newV1Prob returns the zero problem of a fresh call, in an arena from
// v1arenas, keeping the backing arrays of the previous call's appended
// slices.
func newV1Prob() *v1prob {
	a := v1arenas.Get().(*v1arena)
	old := a.prob
	a.prob = v1prob{ar: a,
		useBuf: old.useBuf[:0], edgeBuf: old.edgeBuf[:0], candBuf: old.candBuf[:0], lctr: old.lctr[:0], left0: old.left0[:0],
		cons: old.cons[:0], sreqs: old.sreqs[:0], devs: old.devs[:0]}
	return &a.prob
}

// release gives the problem's arena back; p and everything carved from
// the arena must not be used afterwards.
func (p *v1prob) release() {
	a := p.ar
	if a == nil {
		return
	}
	for _, s := range []interface{ reset() }{&a.bools, &a.i32, &a.u64, &a.i64, &a.ints, &a.uses, &a.edges, &a.lists, &a.groups, &a.alts, &a.cands, &a.picks, &a.matchers} {
		s.reset()
	}
	// Drop what the problem points to, so that a kept arena holds no
	// inventory, state or request alive.
	a.search, a.searchUsed = v1search{}, false
	a.pol = polState{costs: keep(a.pol.costs)[:0]}
	clear(a.prob.cons)
	clear(a.prob.sreqs[:cap(a.prob.sreqs)])
	a.prob = v1prob{useBuf: keep(a.prob.useBuf), edgeBuf: keep(a.prob.edgeBuf), candBuf: keep(a.prob.candBuf), lctr: keep(a.prob.lctr),
		left0: keep(a.prob.left0), cons: keep(a.prob.cons), sreqs: keep(a.prob.sreqs), devs: keep(a.prob.devs)}
	v1arenas.Put(a)
}

// keep is s, to be reused, unless it grew beyond v1arenaKeep elements.
func keep[T any](s []T) []T {
	if cap(s) > v1arenaKeep {
		return nil
	}
	return s
}
