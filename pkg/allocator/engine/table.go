package engine

import (
	"context"
	"slices"
)

// Table is a problem a front end lays out itself, for a search under its
// Policy (the seed front end's: its leaves): devices 0..n-1 of the front
// end's own numbering, no inventory, requests of one alternative each
// with a count of slots, and disjoint groups of devices for symmetry.
// Its memory comes from an arena: call Release when done with it and
// with what Search returned.
//
// A front end does, in order: NewTable; Int32s for its Policy's state;
// Free for each free device; Classes and Groups for symmetry; Search,
// reading its Picks; Release.
type Table struct {
	p *v1prob
}

// NewTable returns the table of n devices, every one in use until Free
// says otherwise.
func NewTable(n int) Table {
	p := newV1Prob()
	ar := p.ar
	for l := range n {
		p.devs = append(p.devs, int32(l))
	}
	flags := ar.bools.take(4 * n)
	p.inUse, p.seedLock, p.free0, p.nbrDone = flags[:n:n], flags[n:2*n:2*n], flags[2*n:3*n:3*n], flags[3*n:]
	ints := ar.i32.take(3 * n)
	p.stamp, p.msig, p.ctrGroup = ints[:n:n], ints[n:2*n:2*n], ints[2*n:]
	p.uses, p.nbr, p.kinds = ar.uses.take(n), ar.edges.take(n), ar.u64.take(n)
	for l := range n {
		p.inUse[l], p.nbrDone[l], p.ctrGroup[l], p.msig[l] = true, true, -1, -1
	}
	p.devGroups = ar.lists.take(n)
	return Table{p: p}
}

// Int32s returns n zeroed int32s from the table's arena, for the
// policy's own state; they live until Release.
func (t Table) Int32s(n int) []int32 { return t.p.ar.i32.take(n) }

// Free marks device l free, a candidate of the requests whose bits are
// set in kinds (request k: bit k, k < 64).
func (t Table) Free(l int32, kinds uint64) {
	t.p.free0[l], t.p.inUse[l], t.p.kinds[l] = true, false, kinds
}

// Kinds returns the requests device l is a candidate of (see Free).
func (t Table) Kinds(l int32) uint64 { return t.p.kinds[l] }

// IsFree reports whether Free marked device l.
func (t Table) IsFree(l int32) bool { return t.p.free0[l] }

// Classes sets the devices' symmetry classes: devices of one class in
// one group are interchangeable (-1: none).
func (t Table) Classes(class []int32) { copy(t.p.msig, class) }

// Groups declares ng disjoint groups of devices, for symmetry;
// group(j) returns group j's members (front end's memory, not modified),
// whether nothing of it is in use, and its class: untouched groups of
// one class are interchangeable (-1: none).
func (t Table) Groups(ng int, group func(j int) (members []int32, fresh bool, class int32)) {
	p := t.p
	p.lgroups = p.ar.groups.take(ng)
	gbuf := p.ar.i32.take(ng)
	for j := range ng {
		lg := &p.lgroups[j]
		gbuf[j] = int32(j)
		lg.members, lg.fresh0, lg.sig = group(j)
		lg.seed = true
		for _, l := range lg.members {
			p.devGroups[l] = gbuf[j : j+1 : j+1]
		}
	}
}

// Search runs the one search under pol for len(count) requests, request
// k taking count[k] devices: the solution's picks, in the
// order taken, and the free devices they made unavailable, as pol's
// costs counted them; found is false when nothing fits. exhaustive turns
// off every pruning (for tests that compare). It fails only with
// ErrDeadline. The picks live until Release.
func (t Table) Search(ctx context.Context, pol Policy, count []int, exhaustive bool) (picks Picks, lost int, found bool, err error) {
	p := t.p
	n := len(p.devs)
	p.policy = pol
	alts := make([]Alt, len(count))
	p.sreqs = p.sreqs[:0]
	salts := p.ar.alts.take(len(count))
	for k, c := range count {
		alts[k].Count = c
		a := &salts[k]
		a.a, a.kind, a.ok = &alts[k], k, true
		for l := range n {
			if p.kinds[l]&(1<<k) != 0 {
				if a.cands == nil {
					if cap(p.candBuf)-len(p.candBuf) < n {
						p.candBuf = make([]int32, 0, 4*n)
					}
					a.cands = p.candBuf[len(p.candBuf):len(p.candBuf)]
				}
				a.cands = append(a.cands, int32(l))
			}
		}
		p.candBuf = p.candBuf[:len(p.candBuf)+len(a.cands)]
		a.cands = slices.Clip(a.cands)
		p.sreqs = append(p.sreqs, v1sreq{alts: salts[k : k+1 : k+1]})
	}
	p.order = p.ar.ints.take(len(count))
	for i := range p.order {
		p.order[i] = i
	}
	s := p.newSearch(ctx, p.ar.ints.take(len(count)), 0)
	s.exhaustive = exhaustive
	if err := s.run(); err != nil {
		return Picks{}, 0, false, err
	}
	if !s.found {
		return Picks{}, 0, false, nil
	}
	return Picks{best: s.best}, s.bestLost, true, nil
}

// Picks is a solution's picks, in the order the search took them.
type Picks struct{ best []v1pick }

// Len returns the number of picks.
func (ps Picks) Len() int { return len(ps.best) }

// At returns pick j: the request and the device.
func (ps Picks) At(j int) (request int, device int32) {
	return int(ps.best[j].sreq), ps.best[j].c.l
}

// Release gives the table's memory back.
func (t Table) Release() { t.p.release() }
