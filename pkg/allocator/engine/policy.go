package engine

// Policy is a front end's order for the one search (package allocator's
// seed front end has one): given one, the search takes slots dynamically
// (the next slot is that of the request with the fewest free
// candidates), rates candidates by the policy's Cost instead of its own,
// takes only devices the policy leaves open besides its own rules, tells
// it every pick and its undoing, and stops at the first solution (the
// caller runs it without branch and bound). Devices are the problem's
// local devices.
type Policy interface {
	// Blocked returns, per device, what keeps it from being picked under
	// the front end's rules: a device is open while its entry is 0. The
	// search reads the slice as Place updates it (it is the policy's
	// memory, read in the search's inner loops without a call).
	Blocked() []int32
	// Place records a pick of device l (sign 1) or its undoing (sign -1).
	Place(l int32, sign int32)
	// Cost rates device l as the next pick: the free devices it makes
	// unavailable (lost, summed into the score) and its cost, lower first.
	Cost(l int32) (lost int32, cost int64)
}

// polState is a search's state under a policy: per request, its slots
// filled; the candidates rated in the call costCall of ordered, by
// symmetry key. A table runs one search, so the arena holds one and the
// problem points to it.
type polState struct {
	blocked  []int32 // Policy.Blocked
	filled   []int
	costs    []v1cand
	costCall int32
}

// checkEvery is how many search steps pass between context checks.
const checkEvery = 64

// maxSteps bounds one search even without a deadline; reaching it is
// reported like a deadline: unknown, not "does not fit".
const maxSteps = 1 << 21

// next goes on once slot k-1 of request i (at position o of the order)
// is filled: with slot k of the same request, in the request order; under
// a policy (v1prob.policy) with the next free slot of the request
// that has the fewest free candidates (ties: the lowest), as seed 002's
// allocator always chose its next request. i < 0 starts the search.
func (s *v1search) next(o, i int, a *v1salt, k int) error {
	if s.p.policy == nil {
		return s.slot(o, i, a, k)
	}
	if i >= 0 {
		s.p.pol.filled[i] = k
	}
	j := s.nextPolicy()
	var err error
	if j < 0 {
		s.solution()
	} else {
		err = s.slot(0, j, &s.p.sreqs[j].alts[0], s.p.pol.filled[j])
	}
	if i >= 0 {
		s.p.pol.filled[i] = k - 1
	}
	return err
}

// nextPolicy returns the request with slots left and the fewest free
// candidates (ties: the lowest), or -1 when every slot is filled.
func (s *v1search) nextPolicy() int {
	best, bestN := -1, 0
	for j := range s.p.sreqs {
		a := &s.p.sreqs[j].alts[0]
		if s.p.pol.filled[j] >= a.a.Count {
			continue
		}
		n := 0
		for _, l := range a.cands {
			if s.free(l) {
				n++
			}
		}
		if best < 0 || n < bestN {
			best, bestN = j, n
		}
	}
	return best
}

// boundPolicy is bound under a policy, where every request with
// slots left comes later.
func (s *v1search) boundPolicy(i int, a *v1salt, k int) bool {
	want := a.a.Count - k
	for j := range s.p.sreqs {
		b := &s.p.sreqs[j].alts[0]
		if j == i || s.p.pol.filled[j] >= b.a.Count {
			continue
		}
		if !s.enough(j, b, s.p.pol.filled[j]) {
			return false
		}
		want += b.a.Count - s.p.pol.filled[j]
	}
	if want <= 1 {
		return true
	}
	s.markN++
	have := 0
	for j := range s.p.sreqs {
		b := &s.p.sreqs[j].alts[0]
		if j != i && s.p.pol.filled[j] >= b.a.Count {
			continue
		}
		for _, l := range b.cands {
			if s.mark[l] != s.markN && s.allowed(j, b, l) {
				s.mark[l] = s.markN
				have++
			}
		}
	}
	return have >= want
}

// claimCount is the number of claims whose devices the search keeps
// apart (a seed problem counts its items as one claim's).
func (p *v1prob) claimCount() int {
	if p.r == nil {
		return 1
	}
	return len(p.r.Keys)
}
