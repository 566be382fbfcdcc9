package engine

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
)

// explain says why the pod's claims do not fit on the node. First the
// requests that cannot be satisfied on their own (every alternative, each
// explained); else the constraints, if the claims fit without them (each
// constraint that fails alone, or all of them together); else the shared
// counters, if the claims fit without those; else the combination (a
// device goes to one request, partitions of a seed device exclude each
// other, a claim holds at most 32 devices).
func (p *v1prob) explain(ctx context.Context) ([]Reason, error) {
	if errs := p.errors(); len(errs) > 0 {
		return errs, nil
	}
	var out []Reason
	for i := range p.sreqs {
		sr := &p.sreqs[i]
		if slices.ContainsFunc(sr.alts, func(a v1salt) bool { return a.ok }) {
			continue
		}
		for ai := range sr.alts {
			out = append(out, p.altReason(sr, &sr.alts[ai]))
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	fixed := p.openFixed()
	// relaxed reports whether the claims fit with some constraints or the
	// counters left out; unknown when the search gives up (the
	// explanation is then the generic one).
	noCapacity := false
	relaxed := func(consOff []bool, noCounters bool) (fits, unknown bool, err error) {
		s := p.newSearch(ctx, fixed, 0)
		s.consOff, s.noCounters, s.noCapacity, s.limit = consOff, noCounters, noCapacity, v1ExplainSteps
		if err := s.run(); err != nil {
			if ctx.Err() != nil {
				return false, false, err
			}
			return false, true, nil
		}
		return s.found, false, nil
	}
	generic := func() []Reason {
		return p.perClaim(ReasonNoCombination, "",
			"every request has candidates, but no combination satisfies all of them (a device goes to one request, partitions of one device exclude each other, a claim holds at most 32 devices, the claim's constraints and the shared counters hold)")
	}
	allOff := make([]bool, len(p.cons))
	for k := range allOff {
		allOff[k] = true
	}
	if len(p.cons) > 0 {
		fits, unknown, err := relaxed(allOff, false)
		if err != nil || unknown {
			return generic(), err
		}
		if fits {
			for k := range p.cons {
				only := slices.Clone(allOff)
				only[k] = false
				fits, unknown, err := relaxed(only, false)
				if err != nil {
					return nil, err
				}
				if !fits && !unknown {
					out = append(out, p.consReason(k, "no devices of the requests satisfy "+p.cons[k].c.Clause))
				}
			}
			if len(out) == 0 {
				for k := range p.cons {
					out = append(out, p.consReason(k, "no devices of the requests satisfy "+p.cons[k].c.Clause+" together with the claim's other constraints"))
				}
			}
			return out, nil
		}
	}
	if len(p.lctr) > 0 {
		fits, unknown, err := relaxed(allOff, true)
		if err != nil || unknown {
			return generic(), err
		}
		if fits {
			clause, detail := p.tightestCounter()
			return p.perClaim(ReasonCounters, clause, "the shared counters of the matching devices cannot hold all requests at once (the tightest: "+detail+")"), nil
		}
	}
	if p.anyMulti {
		noCapacity = true
		fits, unknown, err := relaxed(allOff, false)
		if err != nil || unknown {
			return generic(), err
		}
		if fits {
			return p.perClaim(ReasonCapacity, "", "every request has candidates, but the consumable capacity of the shared devices cannot hold all the requests' shares at once"), nil
		}
	}
	return p.perClaim(ReasonNoCombination, "",
		"every request has candidates, but no combination satisfies all of them (a device goes to one request, partitions of one device exclude each other, a claim holds at most 32 devices)"), nil
}

// openFixed fixes the requests with one possible alternative and leaves
// the others open.
func (p *v1prob) openFixed() []int {
	fixed := make([]int, len(p.sreqs))
	for i := range p.sreqs {
		fixed[i] = -1
		var ok []int
		for ai := range p.sreqs[i].alts {
			if p.sreqs[i].alts[ai].ok {
				ok = append(ok, ai)
			}
		}
		if len(ok) == 1 {
			fixed[i] = ok[0]
		}
	}
	return fixed
}

// perClaim gives one reason per pending claim, naming its requests.
func (p *v1prob) perClaim(code ReasonCode, clause, detail string) []Reason {
	var out []Reason
	for ci := range p.r.Keys {
		if !p.r.Pending[ci] || len(p.r.Reqs[ci]) == 0 {
			continue
		}
		var names []string
		for _, q := range p.r.Reqs[ci] {
			names = append(names, q.Name)
		}
		out = append(out, NewReason(code, p.r.Keys[ci], "", names, clause, detail))
	}
	return out
}

func (p *v1prob) consReason(k int, detail string) Reason {
	c := &p.cons[k]
	names := c.c.Requests
	if len(names) == 0 {
		for _, q := range p.r.Reqs[c.claim] {
			names = append(names, q.Name)
		}
	}
	return NewReason(ReasonConstraint, p.r.Keys[c.claim], "", names, c.c.Clause, detail)
}

// altReason explains why an alternative cannot be satisfied on the node
// on its own.
func (p *v1prob) altReason(sr *v1sreq, a *v1salt) Reason {
	st := &a.stats
	key := p.r.Keys[sr.claim]
	driver := ""
	if st.drivers == 1 {
		driver = st.driver
	}
	reason := func(code ReasonCode, clause, detail string) Reason {
		if len(p.unusable) > 0 && code != ReasonPoolIncomplete {
			// Upstream says so too ("invalid resource pools were
			// encountered"): the pool may be what is missing.
			pool := &p.inv.pools[p.unusable[0]]
			detail += fmt.Sprintf("; pool %s/%s reaches this node but cannot be used: %s%s", pool.Driver, pool.Name, pool.Incomplete, pool.Invalid)
		}
		return NewReason(code, key, driver, []string{a.a.Name}, clause, detail)
	}
	if a.a.All && st.allCode != "" {
		return reason(st.allCode, st.allClause, st.allDetail)
	}
	if st.devices == 0 {
		return reason(ReasonNoMatch, "", "no device is available on this node")
	}
	inUseMatching := 0
	if st.inUse > 0 {
		// In-use devices were not evaluated; do it now, errors count as
		// not matching.
		for l, x := range p.devs {
			if (p.inUse[l] || p.seedLock[l]) && !a.a.Admin {
				if at, err := p.evaluate(a.a, nil, x); err == nil && at < 0 {
					inUseMatching++
				}
			}
		}
	}
	if st.matched == 0 && inUseMatching == 0 {
		worst, n := 0, -1
		for j, c := range st.rejected {
			if c > n {
				worst, n = j, c
			}
		}
		if n <= 0 {
			return reason(ReasonInUse, "", fmt.Sprintf("all %d devices of the node are in use", st.devices))
		}
		expr, whose := p.selectorAt(a.a, worst)
		code := ReasonNoMatch
		if worst < len(a.a.ClassSel) {
			code = ReasonClassFilter
		}
		return reason(code, expr, fmt.Sprintf("no device matches: %d of %d rejected by %s %s", n, st.devices-st.inUse, whose, expr))
	}
	want := a.a.Count
	if a.a.All {
		return reason(ReasonNoMatch, "", "asks for all matching devices, but none matches")
	}
	have := len(a.cands)
	// Blame what alone stands between the request and enough devices.
	switch {
	case st.tainted > 0 && st.tainted == st.matched && inUseMatching == 0:
		return reason(ReasonTainted, st.taint, fmt.Sprintf("every matching device (%d) has taints the request does not tolerate, such as %s", st.tainted, st.taint))
	case st.counters > 0 && have+st.counters >= want:
		l := p.firstCounterBlocked(a)
		return reason(ReasonCounters, p.counterClause(l), fmt.Sprintf("needs %s, %d available; the shared counters of %s are used up (%s)",
			v1n(want, "device"), have, v1n(st.counters, "more matching device"), p.counterClause(l)))
	case st.capacity > 0 && have+st.capacity >= want:
		return reason(ReasonCapacity, st.capClause, fmt.Sprintf("needs %s, %d available; %s without room for the request's share (%s)",
			v1n(want, "device"), have, v1n(st.capacity, "more matching device"), st.capClause))
	case inUseMatching > 0 && have+inUseMatching >= want:
		also := ""
		if st.tainted > 0 { // tolerating the taints would do too: say so
			also = fmt.Sprintf("; %d more with taints the request does not tolerate, such as %s", st.tainted, st.taint)
		}
		return reason(ReasonInUse, "", fmt.Sprintf("needs %s, %d available; %s in use or locked by partitions in use%s",
			v1n(want, "device"), have, v1n(inUseMatching, "more matching device"), also))
	case st.tainted > 0 && have+st.tainted >= want:
		return reason(ReasonTainted, st.taint, fmt.Sprintf("needs %s, %d available; %s with taints the request does not tolerate, such as %s",
			v1n(want, "device"), have, v1n(st.tainted, "more matching device"), st.taint))
	}
	if st.capacity > 0 {
		return reason(ReasonNotEnough, "", fmt.Sprintf("needs %s, %d of %d matching available (%d in use or locked, %d with taints not tolerated, %d without room in their shared counters, %d without room in their capacity)",
			v1n(want, "device"), have, st.matched+inUseMatching, inUseMatching, st.tainted, st.counters, st.capacity))
	}
	return reason(ReasonNotEnough, "", fmt.Sprintf("needs %s, %d of %d matching available (%d in use or locked, %d with taints not tolerated, %d without room in their shared counters)",
		v1n(want, "device"), have, st.matched+inUseMatching, inUseMatching, st.tainted, st.counters))
}

// firstCounterBlocked returns a matching device whose counters do not fit.
func (p *v1prob) firstCounterBlocked(a *v1salt) int32 {
	for l, x := range p.devs {
		if p.inUse[l] || p.seedLock[l] || fitsIn(p.uses[l], p.left0) {
			continue
		}
		if at, err := p.evaluate(a.a, nil, x); err == nil && at < 0 {
			return int32(l)
		}
	}
	return -1
}

// counterClause names the first counter of device l that does not fit.
func (p *v1prob) counterClause(l int32) string {
	if l < 0 {
		return ""
	}
	for _, u := range p.uses[l] {
		if p.left0[u.Counter] < u.Amount {
			c := &p.inv.ctrs[p.lctr[u.Counter]]
			pool := &p.inv.pools[c.pool]
			consumes := v1Amount(u.Amount, c)
			if u.Amount == AmountNever {
				consumes = "more than the counter's total of " + c.exact.String()
			}
			return fmt.Sprintf("%s/%s counter set %s counter %s: %s left, device %s consumes %s", pool.Driver, pool.Name, c.Set, c.Name,
				v1Amount(p.left0[u.Counter], c), p.inv.devs[p.devs[l]].d.Name, consumes)
		}
	}
	return ""
}

// tightestCounter names the counter, among those the candidates consume,
// with the least left of its total.
func (p *v1prob) tightestCounter() (clause, detail string) {
	used := make([]bool, len(p.lctr))
	for i := range p.sreqs {
		for _, a := range p.sreqs[i].alts {
			for _, l := range a.cands {
				for _, u := range p.uses[l] {
					used[u.Counter] = true
				}
			}
		}
	}
	best, bestShare := -1, 0.0
	for c := range p.lctr {
		if !used[c] {
			continue
		}
		ctr := &p.inv.ctrs[p.lctr[c]]
		share := float64(p.left0[c]) / float64(max(ctr.Total, 1))
		if best < 0 || share < bestShare {
			best, bestShare = c, share
		}
	}
	if best < 0 {
		return "", "no counter found"
	}
	c := &p.inv.ctrs[p.lctr[best]]
	pool := &p.inv.pools[c.pool]
	clause = fmt.Sprintf("%s/%s counter set %s counter %s", pool.Driver, pool.Name, c.Set, c.Name)
	return clause, fmt.Sprintf("%s has %s of %s left", clause, v1Amount(p.left0[best], c), v1Amount(c.Total, c))
}

// v1Amount formats a value of counter c.
func v1Amount(v int64, c *Counter) string {
	q := resource.NewScaledQuantity(v, c.Scale)
	q.Format = c.format
	return q.String()
}

// v1n is "1 device", "2 devices".
func v1n(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
