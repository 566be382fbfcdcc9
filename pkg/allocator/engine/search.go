package engine

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
)

// v1BreakCost is what breaking up a fresh partitionable device (the first
// pick from a counter set or seed instance of several devices, none of
// them in use) costs, in devices lost: more than any number of devices,
// so that best fit first keeps whole devices whole, then loses the fewest
// free devices.
const v1BreakCost = 1 << 20

// v1ExplainSteps bounds each search that explains a failure; past it the
// explanation is the generic one.
const v1ExplainSteps = 1 << 12

// v1search is one depth-first search over a v1prob: requests in p.order,
// for each its alternative (in priority order), then its devices, best
// first. It is complete: it finds a solution whenever one exists, unless
// the context or the step limit ends it first (ErrDeadline).
//
// Pruning keeps it complete: forward checking (every request must still
// have enough allowed candidates), subsets instead of sequences within a
// request (a device tried for one slot is not tried again for the later
// slots of the same request), interchangeable devices tried once, and,
// after the first solution, branch and bound on the cost.
//
// It is the one search of both APIs: a seed request comes with the seed
// front end's policy (v1prob.policy, policy.go), under which the next slot is that
// of the request with the fewest free candidates, candidates cost what
// the seed's best fit says, and the first solution is the answer.
type v1search struct {
	p     *v1prob
	ctx   context.Context
	fixed []int // per request: the alternative it must use, or -1 for any
	// consOff (per constraint) and noCounters relax the problem, to
	// explain a failure.
	consOff    []bool
	noCounters bool
	noCapacity bool // shares need no room (explain)
	budget     int  // steps after the first solution spent improving it
	limit      int  // steps before giving up without a solution
	steps      int

	pickNA   []int32 // per device: picks without admin access
	pickAny  []int32
	seedBlk  []int32 // per device: picks of seed leaves it conflicts with
	gPicks   []int32 // per local group: picks without admin access
	left     []int64 // per local counter
	claimDev [][]int32
	consN    []int32
	consVal  []string
	consSeen []map[string]int32
	bans     []uint64 // per device: requests (bit = index < 64) that must not take it again
	chosen   []int    // per request: the alternative taken
	picks    []v1pick
	cost     int64    // of the picks so far
	lost     int      // free devices the picks made unavailable
	minNA    []int    // per order position: least non-admin devices still to pick from there on
	pend     []uint64 // per order position: the alternatives (kinds) of the requests after it
	cbuf     []v1cand // the candidate lists of the slots on the path, as a stack
	banned   []int32  // the bans of the slots on the path, as a stack
	gStamp   []int32  // per local group: call of ordered that computed gFresh
	gFresh   []bool   // per local group: untouched, for symmetry
	call     int32
	gCnt     []int32 // per local group: scratch of enough
	gCap     []int64 // per counter of a counter group: scratch of enough
	gList    []int32
	mark     []int32 // per device: scratch of bound
	markN    int32
	capLeft  [][]int64 // per shareable device: what its capacities have left (nil for others)
	// exhaustive (seed policy, tests) turns off the pruning: no bound, no
	// subsets, no symmetry.
	exhaustive bool

	found      bool
	done       bool
	best       []v1pick
	bestChosen []int
	bestCost   int64
	bestLost   int
}

type v1pick struct {
	sreq int32
	c    v1cand
}

// v1cand is a candidate of a slot: the device, what taking it costs
// (cost, of which lost free devices), how many later requests could use
// it, and its symmetry key (-1 for none).
type v1cand struct {
	l      int32
	lost   int32
	demand int32
	cost   int64
	key    int64
}

func (p *v1prob) newSearch(ctx context.Context, fixed []int, budget int) *v1search {
	n, ng := len(p.devs), len(p.lgroups)
	ar := p.ar
	s := &ar.search
	if ar.searchUsed {
		s = new(v1search)
	}
	ar.searchUsed = true
	ints := ar.i32.take(4*n + 3*ng + len(p.cons))
	*s = v1search{p: p, ctx: ctx, fixed: append(ar.ints.room(len(fixed)), fixed...), budget: budget, limit: maxSteps,
		pickNA: ints[:n:n], pickAny: ints[n : 2*n : 2*n], seedBlk: ints[2*n : 3*n : 3*n], mark: ints[3*n : 4*n : 4*n],
		gPicks: ints[4*n : 4*n+ng : 4*n+ng], gStamp: ints[4*n+ng : 4*n+2*ng : 4*n+2*ng], gCnt: ints[4*n+2*ng : 4*n+3*ng : 4*n+3*ng],
		consN: ints[4*n+3*ng:], gCap: ar.i64.take(p.nGroupCtr),
		// The first slot's candidates, at most the node's devices, fit
		// without growing the stack.
		cbuf:   ar.cands.room(n),
		banned: ar.i32.room(n), picks: ar.picks.room(n), best: ar.picks.room(n),
		gFresh: ar.bools.take(ng), bans: ar.u64.take(n), left: append(ar.i64.room(len(p.left0)), p.left0...), claimDev: ar.lists.take(p.claimCount()),
		consVal: make([]string, len(p.cons)), consSeen: make([]map[string]int32, len(p.cons)),
		chosen: ar.ints.take(len(p.sreqs)), minNA: ar.ints.take(len(p.order) + 1), pend: ar.u64.take(len(p.order) + 1)}
	if p.policy != nil {
		p.pol = &ar.pol
		*p.pol = polState{blocked: p.policy.Blocked(), filled: ar.ints.take(len(p.sreqs)), costs: p.pol.costs[:0]}
	}
	for k := range p.cons {
		if !p.cons[k].c.Match {
			s.consSeen[k] = map[string]int32{}
		}
	}
	if p.anyMulti {
		s.capLeft = make([][]int64, n)
		for l, left := range p.capLeft0 {
			if left != nil {
				s.capLeft[l] = slices.Clone(left)
			}
		}
	}
	for o := len(p.order) - 1; o >= 0; o-- {
		i := p.order[o]
		least := 1 << 30
		var kinds uint64
		for ai := range p.sreqs[i].alts {
			a := &p.sreqs[i].alts[ai]
			if !s.allowedAlt(i, ai) {
				continue
			}
			need := need(a)
			if a.a.Admin {
				need = 0
			}
			least = min(least, need)
			if a.kind >= 0 {
				kinds |= 1 << a.kind
			}
		}
		if least == 1<<30 {
			least = 0
		}
		s.minNA[o] = s.minNA[o+1] + least
		if o > 0 {
			s.pend[o-1] = s.pend[o] | kinds
		}
	}
	return s
}

func (s *v1search) allowedAlt(i, ai int) bool {
	return s.p.sreqs[i].alts[ai].ok && (s.fixed[i] < 0 || s.fixed[i] == ai)
}

// run searches; afterwards found says whether there is a solution, and
// best holds the cheapest one seen.
func (s *v1search) run() error {
	return s.request(0)
}

func (s *v1search) request(o int) error {
	if s.p.policy != nil {
		return s.next(0, -1, nil, 0)
	}
	if o == len(s.p.order) {
		s.solution()
		return nil
	}
	i := s.p.order[o]
	sr := &s.p.sreqs[i]
	for ai := range sr.alts {
		if !s.allowedAlt(i, ai) {
			continue
		}
		s.chosen[i] = ai
		if err := s.slot(o, i, &sr.alts[ai], 0); err != nil || s.done {
			return err
		}
	}
	return nil
}

func (s *v1search) solution() {
	if !s.found || s.cost < s.bestCost {
		s.best = append(s.best[:0], s.picks...)
		s.bestChosen = append(s.bestChosen[:0], s.chosen...)
		s.bestCost, s.bestLost = s.cost, s.lost
	}
	s.found = true
	if s.budget <= 0 {
		s.done = true
	}
}

func (s *v1search) step() error {
	s.steps++
	if s.found {
		if s.budget--; s.budget <= 0 {
			s.done = true
		}
	}
	if s.steps%checkEvery == 0 {
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrDeadline, err)
		}
		if s.steps >= s.limit && !s.found {
			return fmt.Errorf("%w: gave up after %d steps", ErrDeadline, s.steps)
		}
	}
	return nil
}

// need is how many devices an alternative takes.
func need(a *v1salt) int {
	if a.a.All {
		return len(a.cands)
	}
	return a.a.Count
}

// slot picks the k-th device of request i (at position o of the order)
// for alternative a.
func (s *v1search) slot(o, i int, a *v1salt, k int) error {
	if k == need(a) {
		return s.request(o + 1)
	}
	if err := s.step(); err != nil || s.done {
		return err
	}
	// Every later pick without admin access costs at least 1.
	rest := int64(s.minNA[o+1])
	if !a.a.Admin {
		rest += int64(need(a) - k - 1)
	}
	if !s.exhaustive && !s.bound(o, i, a, k) {
		return nil
	}
	if a.a.All {
		c := s.candidate(o, i, a, a.cands[k])
		if s.found && s.cost+c.cost+rest >= s.bestCost {
			return nil
		}
		s.pick(i, a, c)
		err := s.next(o, i, a, k+1)
		s.unpick(i, a, c)
		return err
	}
	cands := s.ordered(o, i, a)
	cstart, bstart := len(s.cbuf)-len(cands), len(s.banned)
	err := func() error {
		for _, c := range cands {
			if i < 64 && s.bans[c.l]>>i&1 != 0 {
				continue
			}
			if s.found && s.cost+c.cost+rest >= s.bestCost {
				continue
			}
			s.pick(i, a, c)
			err := s.next(o, i, a, k+1)
			s.unpick(i, a, c)
			if err != nil || s.done {
				return err
			}
			s.ban(i, c.l)
			if c.key >= 0 && i < 64 {
				// Its images too: their subtrees are images of c's, and
				// a later candidate's subtree with one of them is an
				// image of a subtree with c. (Under the seed policy
				// images are not candidates: see ordered.)
				for _, d := range cands {
					if d.key == c.key && s.bans[d.l]>>i&1 == 0 {
						s.ban(i, d.l)
					}
				}
			}
		}
		return nil
	}()
	for _, l := range s.banned[bstart:] {
		s.bans[l] &^= 1 << i
	}
	s.banned = s.banned[:bstart]
	s.cbuf = s.cbuf[:cstart]
	return err
}

// ban keeps device l from the later slots of request i, while the
// current slot tries its other candidates: within a request, devices are
// chosen as a set, each set once.
func (s *v1search) ban(i int, l int32) {
	if i < 64 && !s.exhaustive {
		s.bans[l] |= 1 << i
		s.banned = append(s.banned, l)
	}
}

// ordered returns the candidates of slot k allowed now, best first: the
// lowest cost (fresh devices broken up, then free devices lost), then the
// fewest later requests that could use it, then inventory order.
func (s *v1search) ordered(o, i int, a *v1salt) []v1cand {
	s.call++
	start := len(s.cbuf)
	for _, l := range a.cands {
		if !s.allowed(i, a, l) {
			continue
		}
		if s.p.policy != nil {
			// Under a policy only the first of interchangeable
			// candidates is tried: the others' subtrees are images of
			// its own.
			if c, image := s.policyCandidate(i, l); !image {
				s.cbuf = append(s.cbuf, c)
			}
			continue
		}
		s.cbuf = append(s.cbuf, s.candidate(o, i, a, l))
	}
	out := s.cbuf[start:]
	slices.SortFunc(out, func(x, y v1cand) int {
		return cmp.Or(cmp.Compare(x.cost, y.cost), cmp.Compare(x.demand, y.demand), cmp.Compare(x.l, y.l))
	})
	return out
}

// policyCandidate rates device l for a slot of request i under the
// policy; image says that an earlier candidate of this slot has its
// symmetry key (and so its cost).
func (s *v1search) policyCandidate(i int, l int32) (c v1cand, image bool) {
	c = v1cand{l: l, key: s.symmetryKey(i, l)}
	if c.key >= 0 {
		if s.p.pol.costCall != s.call {
			s.p.pol.costs, s.p.pol.costCall = s.p.pol.costs[:0], s.call
		}
		for _, d := range s.p.pol.costs {
			if d.key == c.key {
				return d, true
			}
		}
	}
	c.lost, c.cost = s.p.policy.Cost(l)
	if c.key >= 0 {
		s.p.pol.costs = append(s.p.pol.costs, c)
	}
	return c, false
}

// candidate rates device l for a slot of request i.
func (s *v1search) candidate(o, i int, a *v1salt, l int32) v1cand {
	c := v1cand{l: l, key: -1, demand: int32(bits.OnesCount64(s.p.kinds[l] & s.pend[o]))}
	if !a.a.Admin {
		c.lost = int32(s.lostOf(l))
		c.cost = int64(c.lost)
		for _, g := range s.p.devGroups[l] {
			if lg := &s.p.lgroups[g]; len(lg.members) > 1 && lg.fresh0 && s.gPicks[g] == 0 {
				c.cost += v1BreakCost
			}
		}
	}
	c.key = s.symmetryKey(i, l)
	return c
}

// symmetryKey returns a key that two candidates of one slot share when
// swapping them (and, for members of counter sets or seed roots that
// nothing has touched yet, swapping their sets or roots) maps the state
// onto itself: then the subtree of one is an image of the other's. -1
// when there is none.
func (s *v1search) symmetryKey(i int, l int32) int64 {
	ms := s.p.msig[l]
	if ms < 0 || s.pickAny[l] != 0 || s.exhaustive {
		return -1
	}
	gs := s.p.devGroups[l]
	if len(gs) == 0 || len(s.p.lgroups[gs[0]].members) == 1 && s.p.lgroups[gs[0]].seed {
		return int64(ms) // independent
	}
	g := gs[0]
	if lg := &s.p.lgroups[g]; lg.sig >= 0 && s.untouched(i, g) {
		return 1<<61 | int64(ms)<<30 | int64(lg.sig)
	}
	return 1<<62 | int64(ms)<<30 | int64(g)
}

// untouched reports whether nothing of group g is picked or banned for
// request i, computed once per call of ordered.
func (s *v1search) untouched(i int, g int32) bool {
	if s.gStamp[g] == s.call {
		return s.gFresh[g]
	}
	fresh := true
	for _, m := range s.p.lgroups[g].members {
		if s.pickAny[m] != 0 || (i < 64 && s.bans[m]>>i&1 != 0) || (s.p.policy != nil && s.bans[m] != 0) {
			fresh = false
			break
		}
	}
	s.gStamp[g], s.gFresh[g] = s.call, fresh
	return fresh
}

// bound is forward checking: the current request must have enough
// allowed candidates left, and so must every later one (for some
// alternative it may still take); and the requests without admin access,
// which cannot share devices, must not need more devices than all of them
// together can still take.
func (s *v1search) bound(o, i int, a *v1salt, k int) bool {
	if !s.enough(i, a, k) {
		return false
	}
	if s.p.policy != nil {
		return s.boundPolicy(i, a, k)
	}
	for _, j := range s.p.order[o+1:] {
		sr := &s.p.sreqs[j]
		ok := false
		for bi := range sr.alts {
			if s.allowedAlt(j, bi) && s.enough(j, &sr.alts[bi], 0) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	want := s.minNA[o+1]
	if !a.a.Admin {
		want += need(a) - k
	}
	if want <= 1 {
		return true
	}
	s.markN++
	have := 0
	count := func(j int, b *v1salt) {
		for _, l := range b.cands {
			if s.mark[l] != s.markN && s.allowed(j, b, l) {
				s.mark[l] = s.markN
				have++
				if s.capLeft != nil && s.capLeft[l] != nil {
					have += want // a shareable device may serve every request
				}
			}
		}
	}
	if !a.a.Admin {
		count(i, a)
	}
	for _, j := range s.p.order[o+1:] {
		sr := &s.p.sreqs[j]
		for bi := range sr.alts {
			if b := &sr.alts[bi]; s.allowedAlt(j, bi) && !b.a.Admin {
				count(j, b)
			}
		}
	}
	return have >= want
}

// enough reports whether alternative a of request i can still get the
// devices of its slots k and on. Candidates that consume from one
// counter set count at most as many as the set has room for: for each of
// its counters, what is left divided by the least any of them consumes.
func (s *v1search) enough(i int, a *v1salt, k int) bool {
	if a.a.All {
		for _, l := range a.cands[k:] {
			if !s.allowed(i, a, l) {
				return false
			}
		}
		return true
	}
	want, have := a.a.Count-k, 0
	if want <= 0 {
		return true
	}
	capped := !a.a.Admin && !s.noCounters
	groups := s.gList[:0]
	for _, l := range a.cands {
		if !s.allowed(i, a, l) {
			continue
		}
		g := s.p.ctrGroup[l]
		if !capped || g < 0 || s.sharedNow(l) {
			if have++; have >= want {
				break
			}
			continue
		}
		lg := &s.p.lgroups[g]
		slots := s.gCap[lg.ctrOff : int(lg.ctrOff)+len(lg.ctrs)]
		if s.gCnt[g] == 0 {
			groups = append(groups, g)
			for j := range slots {
				slots[j] = -1
			}
		}
		s.gCnt[g]++
		// slots[j]: the most devices of this set that counter j could
		// hold, over the devices seen (a device that does not consume
		// it: unbounded).
		for j, c := range lg.ctrs {
			fit := int64(1) << 40
			for _, u := range s.p.uses[l] {
				if u.Counter == c && u.Amount > 0 {
					fit = s.left[c] / u.Amount
				}
			}
			slots[j] = max(slots[j], fit)
		}
	}
	for _, g := range groups {
		lg := &s.p.lgroups[g]
		n := int64(s.gCnt[g])
		for _, v := range s.gCap[lg.ctrOff : int(lg.ctrOff)+len(lg.ctrs)] {
			n = min(n, v)
		}
		have += int(max(n, 0))
		s.gCnt[g] = 0
	}
	s.gList = groups[:0]
	return have >= want
}

// allowed reports whether request i may take device l for alternative a
// now: never twice in one claim, at most AllocationResultsMaxSize per
// claim; without admin access not taken by another request without it,
// no partition conflict, counters fit; the claim's constraints hold.
func (s *v1search) allowed(i int, a *v1salt, l int32) bool {
	c := s.p.sreqs[i].claim
	cd := s.claimDev[c]
	if len(cd) >= resourcev1.AllocationResultsMaxSize && s.p.policy == nil {
		return false
	}
	multi := s.capLeft != nil && s.capLeft[l] != nil
	if multi {
		// Shares: one per request, as many per claim as it has requests.
		if s.pickedBy(i, l) {
			return false
		}
	} else if s.p.policy == nil && slices.Contains(cd, l) {
		return false
	}
	if !a.a.Admin {
		switch {
		case multi:
			if !s.noCapacity && !fitsIn64(a.share[l], s.capLeft[l]) {
				return false
			}
			if s.pickNA[l] == 0 && !s.noCounters && !fitsIn(s.p.uses[l], s.left) {
				return false
			}
		case s.pickNA[l] > 0 || s.seedBlk[l] > 0 || (s.p.pol != nil && s.p.pol.blocked[l] != 0):
			return false
		case !s.noCounters && !fitsIn(s.p.uses[l], s.left):
			return false
		}
	}
	if i < 64 && s.bans[l]>>i&1 != 0 {
		return false
	}
	for _, k := range a.cons {
		if s.consOff != nil && s.consOff[k] {
			continue
		}
		v := s.p.cons[k].vals[s.p.devs[l]]
		switch {
		case v == "":
			return false
		case s.p.cons[k].c.Match:
			if s.consN[k] > 0 && s.consVal[k] != v {
				return false
			}
		case s.consSeen[k][v] > 0:
			return false
		}
	}
	return true
}

// free reports whether device l is still free: nothing takes it, its
// partitions and counters allow it.
func (s *v1search) free(l int32) bool {
	return s.p.free0[l] && s.pickNA[l] == 0 && s.seedBlk[l] == 0 && (s.noCounters || fitsIn(s.p.uses[l], s.left)) &&
		(s.p.pol == nil || s.p.pol.blocked[l] == 0)
}

// lostOf counts the free devices a pick of l (without admin access) makes
// unavailable: l itself and the neighbors whose partitions conflict or
// whose counters no longer fit.
func (s *v1search) lostOf(l int32) int {
	if s.sharedNow(l) {
		return 0 // a further share: nothing else changes
	}
	n := 1
	for _, e := range s.p.neighbors(l) {
		if !s.free(e.l) {
			continue
		}
		if e.conflict || (!s.noCounters && !s.fitsAfter(e.l, l)) {
			n++
		}
	}
	return n
}

// fitsAfter reports whether x's counters still fit once l has taken its.
func (s *v1search) fitsAfter(x, l int32) bool {
	for _, u := range s.p.uses[x] {
		left := s.left[u.Counter]
		for _, v := range s.p.uses[l] {
			if v.Counter == u.Counter {
				left -= v.Amount
			}
		}
		if left < u.Amount {
			return false
		}
	}
	return true
}

func (s *v1search) pick(i int, a *v1salt, c v1cand) {
	l := c.l
	claim := s.p.sreqs[i].claim
	s.claimDev[claim] = append(s.claimDev[claim], l)
	s.pickAny[l]++
	if !a.a.Admin {
		if s.capLeft != nil && s.capLeft[l] != nil {
			for j, v := range a.share[l] {
				s.capLeft[l][j] -= v
			}
		}
		s.pickNA[l]++
		for _, g := range s.p.devGroups[l] {
			s.gPicks[g]++
		}
		for _, e := range s.p.neighbors(l) {
			if e.conflict {
				s.seedBlk[e.l]++
			}
		}
		if s.pickNA[l] == 1 {
			for _, u := range s.p.uses[l] {
				s.left[u.Counter] -= u.Amount
			}
		}
	}
	for _, k := range a.cons {
		if s.consOff != nil && s.consOff[k] {
			continue
		}
		v := s.p.cons[k].vals[s.p.devs[l]]
		if s.consN[k]++; s.consN[k] == 1 {
			s.consVal[k] = v
		}
		if m := s.consSeen[k]; m != nil {
			m[v]++
		}
	}
	if s.p.policy != nil {
		s.p.policy.Place(l, 1)
	}
	s.picks = append(s.picks, v1pick{sreq: int32(i), c: c})
	s.cost += c.cost
	s.lost += int(c.lost)
}

func (s *v1search) unpick(i int, a *v1salt, c v1cand) {
	l := c.l
	claim := s.p.sreqs[i].claim
	s.claimDev[claim] = s.claimDev[claim][:len(s.claimDev[claim])-1]
	s.pickAny[l]--
	if !a.a.Admin {
		if s.capLeft != nil && s.capLeft[l] != nil {
			for j, v := range a.share[l] {
				s.capLeft[l][j] += v
			}
		}
		s.pickNA[l]--
		for _, g := range s.p.devGroups[l] {
			s.gPicks[g]--
		}
		for _, e := range s.p.neighbors(l) {
			if e.conflict {
				s.seedBlk[e.l]--
			}
		}
		if s.pickNA[l] == 0 {
			for _, u := range s.p.uses[l] {
				s.left[u.Counter] += u.Amount
			}
		}
	}
	for _, k := range a.cons {
		if s.consOff != nil && s.consOff[k] {
			continue
		}
		v := s.p.cons[k].vals[s.p.devs[l]]
		s.consN[k]--
		if m := s.consSeen[k]; m != nil {
			if m[v]--; m[v] == 0 {
				delete(m, v)
			}
		}
	}
	if s.p.policy != nil {
		s.p.policy.Place(l, -1)
	}
	s.picks = s.picks[:len(s.picks)-1]
	s.cost -= c.cost
	s.lost -= int(c.lost)
}

// solve finds the allocation: the first combination of alternatives, in
// the order of the requests and of their subrequests, for which devices
// exist, and for it the devices of least cost (within v1ImproveSteps).
// nil when nothing fits.
//
// The combination is found greedily: a first search with every
// alternative open gives a witness; then, request by request, each
// alternative before the witness's is tried with the earlier requests
// fixed and the later ones open, and the first that has a solution
// becomes the new witness.
func (p *v1prob) solve(ctx context.Context) (*v1search, error) {
	s, err := p.solveCombination(ctx)
	if err != nil || s == nil {
		return nil, err
	}
	// A subrequest whose selector failed to evaluate is tried by
	// upstream when no earlier subrequest fits: its error then fails the
	// claim.
	for i := range p.sreqs {
		for ai := range s.bestChosen[i] {
			if p.sreqs[i].alts[ai].err != nil {
				return nil, nil
			}
		}
	}
	return s, nil
}

// errors returns the reasons of the subrequests whose selectors failed
// to evaluate.
func (p *v1prob) errors() []Reason {
	var out []Reason
	for i := range p.sreqs {
		for _, a := range p.sreqs[i].alts {
			if a.err != nil {
				out = append(out, *a.err)
			}
		}
	}
	return out
}

func (p *v1prob) solveCombination(ctx context.Context) (*v1search, error) {
	fixed := p.openFixed()
	for i := range p.sreqs {
		if !slices.ContainsFunc(p.sreqs[i].alts, func(a v1salt) bool { return a.ok }) {
			return nil, nil
		}
	}
	run := func() (*v1search, error) {
		budget := v1ImproveSteps
		if slices.Contains(fixed, -1) {
			budget = 0
		}
		s := p.newSearch(ctx, fixed, budget)
		return s, s.run()
	}
	s, err := run()
	if err != nil || !s.found {
		return nil, err
	}
	if !slices.Contains(fixed, -1) {
		return s, nil
	}
	w := slices.Clone(s.bestChosen)
	for i := range p.sreqs {
		if fixed[i] >= 0 {
			continue
		}
		for ai := range w[i] {
			if !p.sreqs[i].alts[ai].ok {
				continue
			}
			fixed[i] = ai
			t, err := run()
			if err != nil {
				return nil, err
			}
			if t.found {
				s, w = t, slices.Clone(t.bestChosen)
				break
			}
		}
		fixed[i] = w[i]
	}
	if !slices.Equal(s.fixed, fixed) {
		if s, err = run(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// sharedNow reports whether device l is shareable and already has a
// share, in the state or picked: a further share consumes no counters
// and takes nothing from other devices.
func (s *v1search) sharedNow(l int32) bool {
	return s.capLeft != nil && s.capLeft[l] != nil && (s.p.shared0[l] || s.pickNA[l] > 0)
}

// pickedBy reports whether request i already holds device l: its picks
// are the last ones on the path while its slots are filled.
func (s *v1search) pickedBy(i int, l int32) bool {
	for k := len(s.picks) - 1; k >= 0 && int(s.picks[k].sreq) == i; k-- {
		if s.picks[k].c.l == l {
			return true
		}
	}
	return false
}
