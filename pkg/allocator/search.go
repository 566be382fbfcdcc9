package allocator

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
)

// checkEvery is how many search steps pass between context checks.
const checkEvery = 64

// maxSteps bounds one search even without a deadline; reaching it is
// reported like a deadline: unknown, not "does not fit".
const maxSteps = 1 << 21

// maxFailed bounds the memo of failed states; it is cleared when full.
const maxFailed = 1 << 16

// maxKinds is the number of distinct predicates one pod may use for one
// driver (kinds are kept in a 64-bit mask).
const maxKinds = 64

// solver finds instances for the requests of one pod on one driver of one
// node. It is a depth-first search over requests with backtracking:
//
//   - the next request is the kind with the fewest free candidates;
//   - its candidates are tried best first: the one that leaves the most
//     leaves allocatable at the same time, then the one inside devices and
//     partitions already in use, then listing order;
//   - interchangeable candidates (equal signatures) are tried once;
//   - states proven infeasible are remembered and not searched again;
//   - counting bounds (Hall-style, with partition capacity) cut branches
//     that cannot be completed.
//
// It never reports "no solution" unless none exists; when the context ends
// first it returns ErrDeadline instead.
type solver struct {
	ctx   context.Context
	dm    *driverModel
	used  []int32
	lock  []int32
	masks []uint64 // per leaf: kinds it matches (0 if unusable)

	kindOf    []int   // per item
	remaining []int32 // per kind
	total     int     // items left
	assign    []int32 // per item: instance, or -1

	sigs    *sigTable
	sig     []int32 // per instance
	gsig    []int32 // per group
	rootCap int32   // sum of root capacities
	failed  map[string]struct{}
	steps   int
	// exhaustive turns off symmetry, memo and bounds: a plain backtracking
	// search that tests compare against (it must give the same answer).
	exhaustive bool
	scratch    []int32
	keyBuf     []byte
	rootSeen   map[int32]bool
}

// failure says why the search found nothing: when mask is set, the
// requests of those kinds (need) exceed the capacity for them; otherwise
// the search was exhausted.
type failure struct {
	mask     uint64
	need     int32
	capacity int32
}

func newSolver(ctx context.Context, dm *driverModel, ds *driverState, masks []uint64, kindOf []int, nKinds int) *solver {
	ni, ng := len(dm.insts), len(dm.groups)
	buf := make([]int32, nKinds+len(kindOf)+2*ni+2*ng)
	take := func(n int) []int32 {
		out := buf[:n:n]
		buf = buf[n:]
		return out
	}
	s := &solver{
		ctx: ctx, dm: dm, masks: masks, kindOf: kindOf, total: len(kindOf),
		remaining: take(nKinds), assign: take(len(kindOf)),
		sig: take(ni), gsig: take(ng), used: take(ni), lock: take(ng),
		sigs: newSigTable(nKinds, ni+ng),
	}
	if ds != nil {
		copy(s.used, ds.used)
		copy(s.lock, ds.lock)
	}
	for i, k := range kindOf {
		s.remaining[k]++
		s.assign[i] = -1
	}
	// Children come after their parents in dm.insts, so a reverse sweep
	// sees every child before its parent.
	for x := len(dm.insts) - 1; x >= 0; x-- {
		for _, g := range dm.insts[x].groups {
			s.gsig[g] = s.groupSig(g)
		}
		s.sig[x] = s.instSig(int32(x))
	}
	for _, r := range dm.roots {
		s.rootCap += s.sigs.info[s.sig[r]].cap
	}
	return s
}

// solve runs the search. On success every item has an instance in assign.
func (s *solver) solve() (bool, *failure, error) {
	if f := s.bound(); f != nil && !s.exhaustive {
		return false, f, nil
	}
	ok, err := s.search()
	if err != nil || ok {
		return ok, nil, err
	}
	return false, &failure{}, nil
}

func (s *solver) search() (bool, error) {
	s.steps++
	if s.steps%checkEvery == 0 {
		if err := s.ctx.Err(); err != nil {
			return false, fmt.Errorf("%w: %w", ErrDeadline, err)
		}
		if s.steps >= maxSteps {
			return false, fmt.Errorf("%w: gave up after %d steps", ErrDeadline, s.steps)
		}
	}
	k := s.nextKind()
	if k < 0 {
		return true, nil
	}
	// With one request left, a free candidate is all it takes: the bound
	// and the memo cannot save work.
	var key string
	if !s.exhaustive && s.total > 1 {
		if s.bound() != nil {
			return false, nil
		}
		key = s.stateKey()
		if _, bad := s.failed[key]; bad {
			return false, nil
		}
	}
	item := s.nextItem(k)
	for _, c := range s.candidates(k) {
		s.place(c.inst, 1)
		s.assign[item] = c.inst
		s.remaining[k]--
		s.total--
		ok, err := s.search()
		if err != nil || ok {
			return ok, err
		}
		s.total++
		s.remaining[k]++
		s.assign[item] = -1
		s.place(c.inst, -1)
	}
	if key != "" {
		if s.failed == nil || len(s.failed) >= maxFailed {
			s.failed = map[string]struct{}{}
		}
		s.failed[key] = struct{}{}
	}
	return false, nil
}

// nextKind returns the kind with requests left and the fewest free
// candidates (ties: lowest kind), or -1 when all requests are placed.
func (s *solver) nextKind() int {
	best, bestN := -1, int32(0)
	for k, r := range s.remaining {
		if r == 0 {
			continue
		}
		n := s.count(k)
		if best < 0 || n < bestN {
			best, bestN = k, n
		}
	}
	return best
}

func (s *solver) count(k int) int32 {
	var n int32
	for _, r := range s.dm.roots {
		n += s.sigs.info[s.sig[r]].counts[k]
	}
	return n
}

func (s *solver) nextItem(k int) int {
	for i, kk := range s.kindOf {
		if kk == k && s.assign[i] < 0 {
			return i
		}
	}
	return -1
}

// bound checks the counting conditions: for every set of kinds with
// requests left (all sets when there are few kinds, else each kind and all
// of them together), the requests of those kinds must not outnumber the
// leaves matching them that can be allocated at the same time.
func (s *solver) bound() *failure {
	var liveBuf [maxKinds]int
	live := liveBuf[:0]
	for k, r := range s.remaining {
		if r > 0 {
			live = append(live, k)
		}
	}
	if len(live) == 0 {
		return nil
	}
	var maskBuf [maxKinds + 1]uint64
	masks := maskBuf[:0]
	if len(live) <= 4 {
		for sub := 1; sub < 1<<len(live); sub++ {
			var m uint64
			for i, k := range live {
				if sub&(1<<i) != 0 {
					m |= 1 << k
				}
			}
			masks = append(masks, m)
		}
	} else {
		var all uint64
		for _, k := range live {
			masks = append(masks, 1<<k)
			all |= 1 << k
		}
		masks = append(masks, all)
	}
	for _, m := range masks {
		var need, capacity int32
		for k := range s.remaining {
			if m&(1<<k) != 0 {
				need += s.remaining[k]
			}
		}
		for _, r := range s.dm.roots {
			capacity += s.sigs.capacity(s.sig[r], m)
		}
		if capacity < need {
			return &failure{mask: m, need: need, capacity: capacity}
		}
	}
	return nil
}

// stateKey identifies the remaining problem up to symmetry: the requests
// left per kind and the multiset of root signatures.
func (s *solver) stateKey() string {
	b := s.keyBuf[:0]
	for _, r := range s.remaining {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	roots := s.scratch[:0]
	for _, r := range s.dm.roots {
		roots = append(roots, s.sig[r])
	}
	slices.Sort(roots)
	for _, r := range roots {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	s.scratch, s.keyBuf = roots, b
	return string(b)
}

// place allocates (sign 1) or frees (sign -1) leaf x and refreshes the
// signatures on its path.
func (s *solver) place(x int32, sign int32) {
	root := s.dm.insts[x].root
	before := s.sigs.info[s.sig[root]].cap
	s.used[x] += sign
	s.sig[x] = s.instSig(x)
	for g := s.dm.insts[x].parent; g >= 0; {
		s.lock[g] += sign
		s.gsig[g] = s.groupSig(g)
		owner := s.dm.groups[g].owner
		s.sig[owner] = s.instSig(owner)
		g = s.dm.insts[owner].parent
	}
	s.rootCap += s.sigs.info[s.sig[root]].cap - before
}

// candidate is a leaf to try for a request, with its ordering keys.
type candidate struct {
	inst int32
	left int32 // leaves allocatable at the same time afterwards
	pack int   // partition groups on its path already in use
	pos  int32 // listing order
}

// candidates returns one representative of each class of interchangeable
// free leaves matching kind k, best first.
func (s *solver) candidates(k int) []candidate {
	var out []candidate
	if s.rootSeen == nil {
		s.rootSeen = map[int32]bool{}
	}
	clear(s.rootSeen)
	for _, r := range s.dm.roots {
		sig := s.sig[r]
		if s.sigs.info[sig].counts[k] == 0 || (s.rootSeen[sig] && !s.exhaustive) {
			continue
		}
		s.rootSeen[sig] = true
		out = s.collect(r, k, out)
	}
	for i := range out {
		c := &out[i]
		c.pack = s.lockedOnPath(c.inst)
		s.place(c.inst, 1)
		c.left = s.rootCap
		s.place(c.inst, -1)
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		switch {
		case a.left != b.left:
			return int(b.left - a.left)
		case a.pack != b.pack:
			return b.pack - a.pack
		}
		return int(a.pos - b.pos)
	})
	return out
}

// collect appends the representative free leaves below x that match kind
// k: inside a locked instance only its chosen group is open, and among
// sibling groups or instances with equal signatures only the first is
// entered.
func (s *solver) collect(x int32, k int, out []candidate) []candidate {
	in := &s.dm.insts[x]
	if in.leaf >= 0 {
		return append(out, candidate{inst: x, pos: in.leaf})
	}
	groups := in.groups
	for _, g := range in.groups {
		if s.lock[g] > 0 {
			groups = []int32{g}
			break
		}
	}
	var seenGroups []int32
	for _, g := range groups {
		gs := s.gsig[g]
		if s.sigs.info[gs].counts[k] == 0 || (slices.Contains(seenGroups, gs) && !s.exhaustive) {
			continue
		}
		seenGroups = append(seenGroups, gs)
		children := s.dm.groups[g].children
		var seen map[int32]bool
		if len(children) > 16 {
			seen = map[int32]bool{}
		}
		for i, c := range children {
			cs := s.sig[c]
			if s.sigs.info[cs].counts[k] == 0 {
				continue
			}
			if s.exhaustive {
				out = s.collect(c, k, out)
				continue
			}
			if seen != nil {
				if seen[cs] {
					continue
				}
				seen[cs] = true
			} else if slices.ContainsFunc(children[:i], func(p int32) bool { return s.sig[p] == cs }) {
				continue
			}
			out = s.collect(c, k, out)
		}
	}
	return out
}

func (s *solver) lockedOnPath(x int32) int {
	n := 0
	for g := s.dm.insts[x].parent; g >= 0; g = s.dm.insts[s.dm.groups[g].owner].parent {
		if s.lock[g] > 0 {
			n++
		}
	}
	return n
}
