package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// v1ImproveSteps is how many search steps AllocateV1 spends, after the
// first solution, looking for one that leaves more of the node free
// (branch and bound). It is a step count, not a time, so that the answer
// depends on the inputs only.
const v1ImproveSteps = 512

// v1prob is a pod's pending requests on one node: the devices that can be
// allocated there, the candidates of each request and the constraints of
// the claims. It is built per AllocateV1 call and used by one goroutine.
type v1prob struct {
	r   *Request
	st  *State
	inv *Inventory
	ar  *v1arena // backs the slices below (see v1arena)

	devs      []int32        // local device → inventory device, ascending
	unusable  []int32        // unusable pools that reach the node
	inUse     []bool         // allocated in the state
	seedLock  []bool         // a seed leaf whose partitions conflict with a leaf in use
	free0     []bool         // free before: not in use, not locked, its counters fit
	uses      [][]CounterUse // per local device: counters consumed (local counter indexes)
	useBuf    []CounterUse
	edgeBuf   []v1edge
	candBuf   []int32
	left0     []int64    // per local counter: what the state leaves
	lctr      []int32    // local counter → inventory counter
	nbr       [][]v1edge // per local device, computed on first use
	nbrDone   []bool
	stamp     []int32
	stampN    int32
	kinds     []uint64 // per local device: the alternatives (bit < 64) it is a candidate of
	msig      []int32  // per local device: its symmetry class (see buildGroups), or -1
	lgroups   []v1lgroup
	devGroups [][]int32 // per local device: its groups (lgroups indexes)
	ctrGroup  []int32   // per local device: its counter group when it has exactly one group, else -1
	nGroupCtr int       // counters of all counter groups

	// Shareable devices (allowMultipleAllocations): capLeft0 is, per
	// local device, what its capacities have left in the state (nil for
	// other devices); shared0 says it has shares already, so a new share
	// consumes no counters.
	capLeft0 [][]int64
	shared0  []bool
	anyMulti bool

	// policy is the front end's order (policy.go; the seed
	// front end's), nil for v1 requests.
	policy Policy
	pol    *polState // the search's state under policy (set by newSearch)

	sreqs []v1sreq  // pending requests, claims in order, requests in order
	order []int     // the order the search takes them in
	cons  []v1consP // constraints of the pending claims
}

// v1edge: a pick of one device can take the freedom of device l: they
// share a counter set, or (conflict) they are seed leaves of one
// instance that cannot be allocated together.
type v1edge struct {
	l        int32
	conflict bool
}

type v1sreq struct {
	claim int
	req   *Req
	alts  []v1salt
}

// v1salt is an alternative of a request on the node.
type v1salt struct {
	a     *Alt
	cands []int32 // ExactCount: the candidates; All: the devices, every one needed
	ok    bool    // not impossible on its own
	err   *Reason // a selector failed to evaluate on a device
	kind  int     // bit in v1prob.kinds, -1 beyond 64
	cons  []int   // the constraints (v1prob.cons) that cover it
	stats v1altStats
	// share and consumed are, per local shareable device that is a
	// candidate, what a share of it for this alternative consumes, in the
	// capacities' units and as quantities (sorted by capacity name).
	share    map[int32][]int64
	consumed map[int32][]resource.Quantity
}

// v1altStats says what became of the node's devices for an alternative,
// for explanations.
type v1altStats struct {
	devices   int   // the node's devices
	inUse     int   // skipped: allocated or partition-locked (ExactCount without admin access)
	rejected  []int // per selector, class selectors first: devices it was the first to reject
	matched   int
	driver    string // of the matched devices, if all have one
	drivers   int    // how many drivers the matched devices have
	tainted   int
	taint     string // the first taint not tolerated
	counters  int    // matched and tolerated, but their shared counters do not fit
	capacity  int    // matched and tolerated, but without room for the request's share, or unable to serve it
	capClause string // the first such capacity
	// All: why the alternative cannot be satisfied
	allCode   ReasonCode
	allClause string
	allDetail string
}

// v1consP is a constraint on the node: its value per local device.
type v1consP struct {
	claim int
	c     *Constraint
	vals  []string // per inventory device; "" when it lacks the attribute
}

// setup builds the node's problem. Reasons come back when a selector
// fails to evaluate on a device (the claim cannot be judged on the node).
func (r *Request) setup(st *State, node *Node) (*v1prob, []Reason) {
	inv := st.inv
	p := newV1Prob()
	p.r, p.st, p.inv = r, st, inv
	p.devs, p.unusable = inv.nodeDevices(node, p.devs)
	n := len(p.devs)
	ar := p.ar
	flags := ar.bools.take(4 * n)
	p.inUse, p.seedLock, p.free0, p.nbrDone = flags[:n:n], flags[n:2*n:2*n], flags[2*n:3*n:3*n], flags[3*n:]
	ints := ar.i32.take(3 * n)
	p.stamp, p.msig, p.ctrGroup = ints[:n:n], ints[n:2*n:2*n], ints[2*n:]
	p.uses, p.nbr, p.kinds = ar.uses.take(n), ar.edges.take(n), ar.u64.take(n)
	var ctrLocal map[int32]int32
	for l, x := range p.devs {
		d := &inv.devs[x]
		used, _ := st.used.Get(d.canon)
		p.inUse[l] = used > 0
		if d.multi {
			p.setupShared(l, d, used)
		}
		if d.d.SeedInstance != "" && !p.inUse[l] {
			held, locked := st.seedHeld(inv.poolKey(d.pool), d.d.SeedInstance)
			p.inUse[l], p.seedLock[l] = held, locked && !held
		}
		if len(d.uses) > 0 && !(d.multi && p.shared0[l]) {
			if ctrLocal == nil {
				ctrLocal = map[int32]int32{}
			}
			start := len(p.useBuf)
			for _, u := range d.uses {
				c, ok := ctrLocal[u.Counter]
				if !ok {
					c = int32(len(p.lctr))
					ctrLocal[u.Counter] = c
					p.lctr = append(p.lctr, u.Counter)
					p.left0 = append(p.left0, st.CounterLeft(u.Counter))
				}
				p.useBuf = append(p.useBuf, CounterUse{Counter: c, Amount: u.Amount})
			}
			p.uses[l] = p.useBuf[start:len(p.useBuf):len(p.useBuf)]
		}
		p.free0[l] = !p.inUse[l] && !p.seedLock[l] && fitsIn(p.uses[l], p.left0)
	}

	for ci := range r.Keys {
		if !r.Pending[ci] {
			continue
		}
		for k := range r.Cons[ci] {
			c := &r.Cons[ci][k]
			p.cons = append(p.cons, v1consP{claim: ci, c: c, vals: inv.attrValues(c.Attr)})
		}
	}

	kind := 0
	var reasons []Reason
	for ci := range r.Keys {
		if !r.Pending[ci] {
			continue
		}
		for qi := range r.Reqs[ci] {
			req := &r.Reqs[ci][qi]
			sr := v1sreq{claim: ci, req: req, alts: ar.alts.take(len(req.Alts))}
			for ai := range req.Alts {
				a := &sr.alts[ai]
				a.a, a.kind = &req.Alts[ai], -1
				if kind < 64 {
					a.kind = kind
				}
				kind++
				for k := range p.cons {
					if p.cons[k].claim == ci && p.cons[k].c.Applies(req.Name, a.a) {
						a.cons = append(a.cons, k)
					}
				}
				if reason, failed := p.candidates(r.Keys[ci], a); failed {
					// A subrequest's selector error counts only if the
					// search gets to that subrequest (see solve). (A
					// copy, so that reason itself does not escape: it
					// would be allocated for every alternative.)
					err := reason
					a.ok, a.cands, a.err = false, nil, &err
					if !req.First {
						reasons = append(reasons, reason)
					}
					continue
				}
				if a.kind >= 0 {
					for _, l := range a.cands {
						p.kinds[l] |= 1 << a.kind
					}
				}
			}
			p.sreqs = append(p.sreqs, sr)
		}
	}
	if len(reasons) > 0 {
		p.release()
		return nil, reasons
	}

	// Requests with the fewest spare candidates first; All requests, whose
	// devices are given, before all.
	p.order = ar.ints.take(len(p.sreqs))
	slack := ar.ints.take(len(p.sreqs))
	for i := range p.sreqs {
		p.order[i] = i
		slack[i] = 1 << 30
		for _, a := range p.sreqs[i].alts {
			switch {
			case !a.ok:
			case a.a.All:
				slack[i] = -1
			default:
				slack[i] = min(slack[i], len(a.cands)-a.a.Count)
			}
		}
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return cmp.Compare(slack[a], slack[b]) })

	p.buildGroups(kind)
	return p, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fitsIn reports whether the consumption fits in what is left.
func fitsIn(uses []CounterUse, left []int64) bool {
	for _, u := range uses {
		if left[u.Counter] < u.Amount {
			return false
		}
	}
	return true
}

// candidates evaluates an alternative on the node's devices: the class's
// selectors, then the request's (upstream's order, the first false one
// decides), then taints; without admin access, devices in use, locked or
// whose counters do not fit are not candidates (and, as upstream does,
// not evaluated: in-use devices are skipped before the selectors). A
// selector that fails to evaluate fails the claim on the node.
func (p *v1prob) candidates(claimKey string, a *v1salt) (Reason, bool) {
	alt := a.a
	st := &a.stats
	st.devices = len(p.devs)
	st.rejected = p.ar.ints.take(len(alt.ClassSel) + len(alt.Sel))
	mcs := p.ar.matchers.take(len(alt.ClassSel) + len(alt.Sel))
	for j, expr := range alt.ClassSel {
		mcs[j] = p.inv.matcher(expr)
	}
	for j, expr := range alt.Sel {
		mcs[len(alt.ClassSel)+j] = p.inv.matcher(expr)
	}
	for l, x := range p.devs {
		if !alt.Admin && !alt.All && (p.inUse[l] || p.seedLock[l]) {
			st.inUse++
			continue
		}
		at, err := p.evaluate(alt, mcs, x)
		if err != nil {
			d := &p.inv.devs[x]
			pool := &p.inv.pools[d.pool]
			expr, whose := p.selectorAt(alt, at)
			return NewReason(ReasonSelectorError, claimKey, pool.Driver, []string{alt.Name}, expr,
				fmt.Sprintf("%s on device %s/%s/%s: %v", whose, pool.Driver, pool.Name, d.d.Name, err)), true
		}
		if at >= 0 {
			st.rejected[at]++
			continue
		}
		st.matched++
		d := &p.inv.devs[x]
		if drv := p.inv.pools[d.pool].Driver; st.drivers == 0 || (st.drivers == 1 && drv != st.driver) {
			st.driver = drv
			st.drivers++
		}
		if d.multi || alt.CapReqs != nil {
			if !p.capacityCandidate(a, int32(l), d) {
				continue
			}
		}
		if t := Untolerated(d.d.Taints, alt.Tolerations); t != nil {
			if st.tainted == 0 {
				st.taint = fmt.Sprintf("%s=%s:%s on %s/%s", t.Key, t.Value, t.Effect, p.inv.pools[d.pool].Name, d.d.Name)
			}
			st.tainted++
			if !alt.All {
				continue
			}
		}
		if !alt.Admin && !alt.All && !fitsIn(p.uses[l], p.left0) {
			st.counters++
			continue
		}
		if a.cands == nil {
			// Candidate lists share one buffer, each with room for
			// every device of the node.
			if cap(p.candBuf)-len(p.candBuf) < len(p.devs) {
				p.candBuf = make([]int32, 0, 4*len(p.devs))
			}
			a.cands = p.candBuf[len(p.candBuf):len(p.candBuf)]
		}
		a.cands = append(a.cands, int32(l))
	}
	p.candBuf = p.candBuf[:len(p.candBuf)+len(a.cands)]
	a.cands = slices.Clip(a.cands)
	if !alt.All {
		a.ok = len(a.cands) >= alt.Count
		return Reason{}, false
	}
	a.ok = p.checkAll(a)
	return Reason{}, false
}

// checkAll decides whether an allocation mode All alternative can be
// satisfied on its own, as upstream decides: no pool that reaches the
// node may be incomplete or invalid (whatever its driver), at least one
// device must match, at most AllocationResultsMaxSize, and every matching
// device must be usable: tolerated and, without admin access, not in use
// (nor partition-locked) and within its counters.
func (p *v1prob) checkAll(a *v1salt) bool {
	st := &a.stats
	fail := func(code ReasonCode, clause, detail string) bool {
		st.allCode, st.allClause, st.allDetail = code, clause, detail
		return false
	}
	if len(p.unusable) > 0 {
		pool := &p.inv.pools[p.unusable[0]]
		why := pool.Incomplete
		if why == "" {
			why = pool.Invalid
		}
		return fail(ReasonPoolIncomplete, pool.Driver+"/"+pool.Name, fmt.Sprintf(
			"asks for all devices, but pool %s/%s, which reaches this node, cannot be used: %s", pool.Driver, pool.Name, why))
	}
	if len(a.cands) == 0 {
		return false
	}
	if len(a.cands) > resourcev1.AllocationResultsMaxSize {
		return fail(ReasonTooManyDevices, "", fmt.Sprintf("asks for all %d matching devices; a claim holds at most %d",
			len(a.cands), resourcev1.AllocationResultsMaxSize))
	}
	if st.tainted > 0 {
		return fail(ReasonTainted, st.taint, fmt.Sprintf("asks for all devices, but %d of them have taints the request does not tolerate, such as %s",
			st.tainted, st.taint))
	}
	if a.a.Admin {
		return true
	}
	for _, l := range a.cands {
		d := &p.inv.devs[p.devs[l]]
		pool := &p.inv.pools[d.pool]
		switch {
		case p.inUse[l]:
			return fail(ReasonInUse, "", fmt.Sprintf("asks for all devices, but %s/%s/%s is in use", pool.Driver, pool.Name, d.d.Name))
		case p.seedLock[l]:
			return fail(ReasonInUse, "", fmt.Sprintf("asks for all devices, but %s/%s/%s is locked by a partition in use", pool.Driver, pool.Name, d.d.Name))
		case d.multi && !fitsIn64(a.share[l], p.capLeft0[l]):
			return fail(ReasonCapacity, capacityClause(pool.Driver+"/"+pool.Name+"/"+d.d.Name, d.caps, p.capLeft0[l], a.share[l]),
				fmt.Sprintf("asks for all devices, but %s/%s/%s has no room for the share: %s", pool.Driver, pool.Name, d.d.Name,
					capacityClause(d.d.Name, d.caps, p.capLeft0[l], a.share[l])))
		case !fitsIn(p.uses[l], p.left0):
			return fail(ReasonCounters, p.counterClause(l), fmt.Sprintf("asks for all devices, but the shared counters of %s/%s/%s do not fit",
				pool.Driver, pool.Name, d.d.Name))
		}
	}
	return true
}

// evaluate runs an alternative's selectors on a device: -1 when all are
// true, else the index of the first false one (class selectors first).
// mcs are the selectors' caches, or nil.
func (p *v1prob) evaluate(alt *Alt, mcs []*v1matchCache, x int32) (int, error) {
	mc := func(j int) *v1matchCache {
		if mcs == nil {
			return p.inv.matcher(p.selectorOf(alt, j))
		}
		return mcs[j]
	}
	for j, expr := range alt.ClassSel {
		ok, err := p.inv.match(mc(j), expr, x)
		if err != nil || !ok {
			return j, err
		}
	}
	for j, expr := range alt.Sel {
		at := len(alt.ClassSel) + j
		ok, err := p.inv.match(mc(at), expr, x)
		if err != nil || !ok {
			return at, err
		}
	}
	return -1, nil
}

func (p *v1prob) selectorOf(alt *Alt, at int) string {
	expr, _ := p.selectorAt(alt, at)
	return expr
}

// selectorAt returns the selector of index at (as evaluate counts) and
// whose it is.
func (p *v1prob) selectorAt(alt *Alt, at int) (expr, whose string) {
	if at < len(alt.ClassSel) {
		return alt.ClassSel[at], "device class " + alt.Class.Name + " selector"
	}
	return alt.Sel[at-len(alt.ClassSel)], "request selector"
}

// v1Untolerated returns the first NoSchedule or NoExecute taint that no
// toleration tolerates, or nil. Other effects (None, unknown ones) never
// prevent allocation.
func Untolerated(taints []resourcev1.DeviceTaint, tols []resourcev1.DeviceToleration) *resourcev1.DeviceTaint {
	for i := range taints {
		t := &taints[i]
		if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tols, func(tol resourcev1.DeviceToleration) bool { return Tolerates(tol, t) }) {
			return t
		}
	}
	return nil
}

// Tolerates is Kubernetes' toleration rule: an empty effect or key
// matches any; Exists matches any value, Equal (the default) the same
// value.
func Tolerates(tol resourcev1.DeviceToleration, t *resourcev1.DeviceTaint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case "", resourcev1.DeviceTolerationOpEqual:
		return tol.Value == t.Value
	case resourcev1.DeviceTolerationOpExists:
		return true
	}
	return false
}

// v1AttrKey returns the value of a device's attribute as a comparable
// key, "" when the device lacks it. The name is fully qualified; a
// device's unqualified names are in its driver's domain. Values of
// different types never compare equal; a value of no known type gets a
// key of its own (it matches no other device, as upstream).
func v1AttrKey(d *v1dev, name resourcev1.FullyQualifiedName, l int) string {
	attr, ok := d.d.Attributes[resourcev1.QualifiedName(name)]
	if !ok {
		domain, id, qualified := cutLast(string(name))
		if !qualified || domain != d.input.Driver {
			return ""
		}
		if attr, ok = d.d.Attributes[resourcev1.QualifiedName(id)]; !ok {
			return ""
		}
	}
	switch {
	case attr.StringValue != nil:
		return "s" + *attr.StringValue
	case attr.IntValue != nil:
		return "i" + strconv.FormatInt(*attr.IntValue, 10)
	case attr.BoolValue != nil:
		return "b" + strconv.FormatBool(*attr.BoolValue)
	case attr.VersionValue != nil:
		return "v" + *attr.VersionValue
	}
	return "?" + strconv.Itoa(l)
}

func cutLast(s string) (before, after string, found bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// localOf returns the local index of inventory device x.
func (p *v1prob) localOf(x int32) (int32, bool) {
	l, ok := slices.BinarySearch(p.devs, x)
	return int32(l), ok
}

// neighbors returns the local devices whose freedom a pick of l can take.
// The lists share one buffer.
func (p *v1prob) neighbors(l int32) []v1edge {
	if p.nbrDone[l] {
		return p.nbr[l]
	}
	p.nbrDone[l] = true
	x := p.devs[l]
	d := &p.inv.devs[x]
	if len(d.groups) == 0 {
		return nil
	}
	p.stampN++
	start := len(p.edgeBuf)
	for _, g := range d.groups {
		for j, y := range p.inv.groups[g] {
			if y == x {
				continue
			}
			m, ok := p.localOf(y)
			if !ok {
				continue
			}
			conflict := g == d.seedGroup && d.seedConflicts[j/64]>>(j%64)&1 != 0
			if p.stamp[m] == p.stampN {
				if conflict {
					for i := start; i < len(p.edgeBuf); i++ {
						if p.edgeBuf[i].l == m {
							p.edgeBuf[i].conflict = true
						}
					}
				}
				continue
			}
			p.stamp[m] = p.stampN
			p.edgeBuf = append(p.edgeBuf, v1edge{l: m, conflict: conflict})
		}
	}
	p.nbr[l] = p.edgeBuf[start:len(p.edgeBuf):len(p.edgeBuf)]
	return p.nbr[l]
}
