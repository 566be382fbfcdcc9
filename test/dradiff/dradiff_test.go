package dradiff

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

var (
	flagSeed  = flag.Uint64("dradiff.seed", 20261126, "seed of the generated cases")
	flagCases = flag.Int("dradiff.cases", 10000, "number of generated cases")
	flagLong  = flag.Bool("dradiff.long", false, "run 40 times as many cases (a long run)")
	flagCase  = flag.Int("dradiff.case", -1, "run only the case with this index (to reproduce one)")
	flagLimit = flag.Duration("dradiff.limit", 2*time.Second, "deadline of one allocation attempt, per side")
	flagShow  = flag.Bool("dradiff.show", false, "log every case with both outcomes")
)

// verdict is the result of comparing both sides on one node.
type verdict int

const (
	agree verdict = iota
	timedOut
	packing // upstream's first fit fails, allot's valid allocation is shown to be an artefact of upstream's order
	// difference: upstream says no, allot's valid allocation relies on a
	// documented difference of allot's (admin access takes nothing from
	// other claims: AllocateV1's comment), shown by asking upstream with
	// the admin-access claims last or the admin-access requests dropped.
	difference
	// variants: upstream's allocator variants disagree with each other,
	// and allot agrees with one of them.
	variants
	disagreement
)

// nodeReport is what one case on one node gave.
type nodeReport struct {
	node    string
	up      upOutcome
	al      allotOutcome
	upProbs []string // checker on upstream's results
	alProbs []string // checker on allot's results
	verdict verdict
	// kind names the disagreement or the packing artefact (for the tally
	// and for the shrinker, which keeps a reduction only if the kind stays).
	kind   string
	detail string
}

// compareNode runs both sides on the node and judges the outcome.
func compareNode(c *Case, node *k8scorev1.Node) nodeReport {
	rep := nodeReport{node: node.Name}
	rep.up = runUpstream(c, c.Claims, node, *flagLimit)
	rep.al = runAllot(c, node, *flagLimit)
	k := newChecker(c, node)
	fail := func(kind, format string, args ...any) nodeReport {
		rep.verdict, rep.kind, rep.detail = disagreement, kind, fmt.Sprintf(format, args...)
		return rep
	}
	if rep.up.kind == failed && unexpectedUpstreamErr(rep.up.err) {
		return fail("upstream-error", "upstream failed unexpectedly (generator or harness bug?): %v", rep.up.err)
	}
	if rep.up.kind == fit {
		rep.upProbs = k.check(ptrs(rep.up.results))
		if len(rep.upProbs) == 0 {
			rep.upProbs = priorityProblems(c, node, ptrs(rep.up.results))
		}
		if len(rep.upProbs) > 0 {
			return fail("checker-rejects-upstream", "the checker rejects upstream's allocation (checker bug, or upstream breaks a documented rule):\n  %s\nupstream:\n%s",
				strings.Join(rep.upProbs, "\n  "), dumpResults(ptrs(rep.up.results)))
		}
	}
	if rep.al.kind == failed {
		return fail("allot-error", "allot failed: %v", rep.al.err)
	}
	if rep.al.kind == fit {
		rep.alProbs = k.check(rep.al.results)
		if len(rep.alProbs) == 0 {
			if rep.alProbs = priorityProblems(c, node, rep.al.results); len(rep.alProbs) > 0 {
				return fail("priority", "allot's allocation does not respect firstAvailable order:\n  %s\nallot:\n%s\nupstream (%s):\n%s",
					strings.Join(rep.alProbs, "\n  "), dumpResults(rep.al.results), rep.up.kind, dumpResults(ptrs(rep.up.results)))
			}
			if rep.alProbs = checkLexFirst(c, node, subVector(c, rep.al.results)); len(rep.alProbs) > 0 {
				return fail("lexicographic", "allot's firstAvailable combination is not the lexicographically first that fits, as AllocateV1 promises:\n  %s\nallot:\n%s",
					strings.Join(rep.alProbs, "\n  "), dumpResults(rep.al.results))
			}
		}
		if len(rep.alProbs) > 0 {
			return fail("allot-invalid", "allot's allocation breaks the rules:\n  %s\nallot:\n%s\nupstream (%s):\n%s",
				strings.Join(rep.alProbs, "\n  "), dumpResults(rep.al.results), rep.up.kind, dumpResults(ptrs(rep.up.results)))
		}
	}
	if rep.al.kind == timeout {
		rep.verdict, rep.kind = timedOut, "allot-timeout"
		return rep
	}
	if rep.up.kind == timeout {
		rep.verdict, rep.kind = timedOut, "upstream-timeout"
		return rep
	}
	switch {
	case rep.up.kind.fits() && rep.al.kind.fits():
		return rep
	case !rep.up.kind.fits() && !rep.al.kind.fits():
		return rep
	case rep.up.kind.fits():
		if v, o := variantAgreeing(c, node, false); v != "" {
			rep.verdict, rep.kind = variants, "variants/"+v
			rep.detail = fmt.Sprintf("upstream's %s variant fits, allot does not (%s); upstream's %s variant agrees with allot (%s %v)\nupstream:\n%s",
				primaryVariant(c), strings.Join(rep.al.reasons, "; "), v, o.kind, o.err, dumpResults(ptrs(rep.up.results)))
			return rep
		}
		return fail("allot-misses-fit", "upstream fits, allot does not: %s\nupstream:\n%s", strings.Join(rep.al.reasons, "; "), dumpResults(ptrs(rep.up.results)))
	}
	// Upstream says no (or failed), allot has a valid allocation. Upstream's
	// search is exhaustive within one order of claims and requests, so this
	// is allowed only when upstream finds an allocation in another order.
	order, o := upstreamOtherOrders(c, node, subVector(c, rep.al.results))
	if order == "" {
		if v, o := variantAgreeing(c, node, true); v != "" {
			rep.verdict, rep.kind = variants, "variants/"+v
			rep.detail = fmt.Sprintf("upstream's %s variant does not fit (%s %v), allot and upstream's %s variant do\nallot:\n%s\nupstream %s:\n%s",
				primaryVariant(c), rep.up.kind, rep.up.err, v, dumpResults(rep.al.results), v, dumpResults(ptrs(o.results)))
			return rep
		}
		return fail("allot-fits-upstream-not", "allot fits with a valid allocation, upstream does not (%s: %v) in any order tried\nallot:\n%s",
			rep.up.kind, rep.up.err, dumpResults(rep.al.results))
	}
	label := strings.SplitN(order, ":", 2)[0]
	rep.verdict, rep.kind = packing, "packing/"+label
	if strings.HasPrefix(label, "admin") {
		rep.verdict, rep.kind = difference, "difference/"+label
	}
	rep.detail = fmt.Sprintf("upstream %s (%v) in the given order, fits with %s\nallot:\n%s\nupstream reordered:\n%s",
		rep.up.kind, rep.up.err, order, dumpResults(rep.al.results), dumpResults(ptrs(o.results)))
	return rep
}

// primaryVariant names the upstream variant the case runs with.
func primaryVariant(c *Case) string {
	if c.needsIncubating() {
		return "incubating"
	}
	return "stable"
}

// variantAgreeing asks upstream's other allocator variants and returns the
// first whose fit (a valid one, when it fits) is wantFit.
func variantAgreeing(c *Case, node *k8scorev1.Node, wantFit bool) (string, upOutcome) {
	for _, v := range otherVariants(c) {
		o := runUpstreamWith(variantFeatures(v), c, c.Claims, node, *flagLimit)
		if o.kind == timeout || (o.kind == fit) != wantFit {
			continue
		}
		if o.kind == fit && len(newChecker(c, node).check(ptrs(o.results))) > 0 {
			continue
		}
		return v, o
	}
	return "", upOutcome{}
}

// priorityProblems runs checkPriority and renders what it finds.
func priorityProblems(c *Case, node *k8scorev1.Node, results []*resourcev1.AllocationResult) []string {
	vs, err := checkPriority(c, node, results)
	if err != nil {
		return []string{"priority check: " + err.Error()}
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

func ptrs(rs []resourcev1.AllocationResult) []*resourcev1.AllocationResult {
	if rs == nil {
		return nil
	}
	out := make([]*resourcev1.AllocationResult, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

func dumpResults(rs []*resourcev1.AllocationResult) string {
	if rs == nil {
		return "  (none)"
	}
	var b strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&b, "  claim %d:", i)
		if r == nil {
			b.WriteString(" nil\n")
			continue
		}
		for _, d := range r.Devices.Results {
			adm := ""
			if d.AdminAccess != nil && *d.AdminAccess {
				adm = "(admin)"
			}
			fmt.Fprintf(&b, " %s=%s/%s/%s%s", d.Request, d.Driver, d.Pool, d.Device, adm)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// pinSubRequests restricts each firstAvailable request to the alternative
// the vector names (-1 leaves it alone).
func pinSubRequests(c *Case, v []int) *Case {
	out := c.Clone()
	i := 0
	for _, claim := range out.Claims {
		for j := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[j]
			if len(req.FirstAvailable) == 0 {
				continue
			}
			if i < len(v) && v[i] >= 0 {
				req.FirstAvailable = req.FirstAvailable[v[i] : v[i]+1]
			}
			i++
		}
	}
	return out
}

// upstreamOtherOrders asks upstream again with the claims and requests in
// other orders that its first-fit search is sensitive to: requests with
// allocation mode All first (a constraint broken by an All device stops
// the search instead of backtracking), claims reversed, and claims with
// admin access last (a device taken with admin access by an earlier claim
// is "in use" for a later claim, but not the other way round); and with
// each firstAvailable request restricted to the alternative allot chose
// (upstream checks every alternative of a request before it starts, and
// fails the whole attempt when, say, an alternative asks for all devices
// while some pool is incomplete, even if an earlier alternative fits). It returns
// the first order that fits, with upstream's outcome, whose results are
// also checked.
func upstreamOtherOrders(c *Case, node *k8scorev1.Node, pin []int) (string, upOutcome) {
	type order struct {
		name string
		f    func(*Case)
	}
	allFirst := func(x *Case) {
		for _, cl := range x.Claims {
			slices.SortStableFunc(cl.Spec.Devices.Requests, func(a, b resourcev1.DeviceRequest) int {
				return cmp.Compare(allRank(a), allRank(b))
			})
		}
	}
	reverse := func(x *Case) { slices.Reverse(x.Claims) }
	adminLast := func(x *Case) {
		slices.SortStableFunc(x.Claims, func(a, b *resourcev1.ResourceClaim) int {
			return cmp.Compare(adminRank(a), adminRank(b))
		})
	}
	for _, o := range []order{
		{"admin-last: claims with admin access last", adminLast},
		{"all-first: requests with allocation mode All first", allFirst},
		{"pinned: firstAvailable requests restricted to allot's alternatives " + fmt.Sprint(pin), func(x *Case) { *x = *pinSubRequests(x, pin) }},
		{"all-first+admin-last", func(x *Case) { allFirst(x); adminLast(x) }},
		{"all-first+pinned", func(x *Case) { allFirst(x); *x = *pinSubRequests(x, pin) }},
		{"pinned+all-first", func(x *Case) { *x = *pinSubRequests(x, pin); allFirst(x) }},
		{"reversed: claims in reverse order", reverse},
		{"all-first+reversed", func(x *Case) { allFirst(x); reverse(x) }},
	} {
		x := c.Clone()
		o.f(x)
		out := runUpstream(x, x.Claims, node, *flagLimit)
		if out.kind != fit {
			continue
		}
		if probs := newChecker(x, node).check(ptrs(out.results)); len(probs) > 0 {
			continue
		}
		return o.name, out
	}
	for _, base := range []struct {
		name string
		c    *Case
	}{{"", c}, {" and firstAvailable pinned to allot's alternatives", pinSubRequests(c, pin)}} {
		if x := adminDropped(base.c); x != nil {
			if o := runUpstream(x, x.Claims, node, *flagLimit); o.kind == fit {
				return "admin-dropped: upstream fits the pod without its admin-access requests" + base.name +
					" (allot's allocation of them is valid by the rule that admin access takes nothing from other claims)", o
			}
		}
	}
	return "", upOutcome{}
}

// adminDropped is the pod without its admin-access requests (nil when it
// has none). Constraint entries naming them go; a constraint left without
// entries goes too.
func adminDropped(c *Case) *Case {
	x := c.Clone()
	dropped := false
	for _, cl := range x.Claims {
		for j := len(cl.Spec.Devices.Requests) - 1; j >= 0; j-- {
			if r := cl.Spec.Devices.Requests[j]; r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
				removeRequest(cl, j)
				dropped = true
			}
		}
	}
	if !dropped {
		return nil
	}
	x.Claims = slices.DeleteFunc(x.Claims, func(cl *resourcev1.ResourceClaim) bool { return len(cl.Spec.Devices.Requests) == 0 })
	return x
}

func allRank(r resourcev1.DeviceRequest) int {
	if r.Exactly != nil && r.Exactly.AllocationMode == resourcev1.DeviceAllocationModeAll {
		return 0
	}
	// A firstAvailable request pinned to one alternative that asks for
	// all devices is one too.
	if len(r.FirstAvailable) == 1 && r.FirstAvailable[0].AllocationMode == resourcev1.DeviceAllocationModeAll {
		return 0
	}
	return 1
}

func adminRank(c *resourcev1.ResourceClaim) int {
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
			return 1
		}
	}
	return 0
}

// tally is the run's summary.
type tally struct {
	cases, nodes                                            int
	fits, noFits, upErrors                                  int // both sides agree: fits / does not fit (of which upstream failed with an error)
	upTimeouts, alTimeouts                                  int
	packing, difference, variants                           int
	disagreements                                           int
	byKind                                                  map[string]int
	upTime, alTime                                          time.Duration
	upMax, alMax                                            time.Duration
	firstAvailable, all, admin                              int // cases using the feature
	constraints, distinct, counters, taints, network, holes int
	incomplete, invalid, oldGen                             int
	shareable, capReqs, shares                              int // consumable capacity
	shareFits                                               int // agreeing fits where allot allocates a share
}

func (t *tally) add(r nodeReport) {
	t.nodes++
	t.upTime += r.up.dur
	t.alTime += r.al.dur
	t.upMax = max(t.upMax, r.up.dur)
	t.alMax = max(t.alMax, r.al.dur)
	if r.kind != "" {
		t.byKind[r.kind]++
	}
	switch r.verdict {
	case agree:
		if r.up.kind == fit {
			t.fits++
			if hasShare(r.al.results) {
				t.shareFits++
			}
		} else {
			t.noFits++
			if r.up.kind == failed {
				t.upErrors++
			}
		}
	case timedOut:
		if r.kind == "allot-timeout" {
			t.alTimeouts++
		} else {
			t.upTimeouts++
		}
	case packing:
		t.packing++
	case difference:
		t.difference++
	case variants:
		t.variants++
	case disagreement:
		t.disagreements++
	}
}

func (t *tally) coverage(c *Case) {
	t.cases++
	has := func(f func() bool) int {
		if f() {
			return 1
		}
		return 0
	}
	reqs := func(f func(r *resourcev1.DeviceRequest) bool) func() bool {
		return func() bool {
			for _, cl := range c.Claims {
				for i := range cl.Spec.Devices.Requests {
					if f(&cl.Spec.Devices.Requests[i]) {
						return true
					}
				}
			}
			return false
		}
	}
	t.firstAvailable += has(reqs(func(r *resourcev1.DeviceRequest) bool { return len(r.FirstAvailable) > 0 }))
	t.all += has(reqs(func(r *resourcev1.DeviceRequest) bool {
		if r.Exactly != nil {
			return r.Exactly.AllocationMode == resourcev1.DeviceAllocationModeAll
		}
		return slices.ContainsFunc(r.FirstAvailable, func(s resourcev1.DeviceSubRequest) bool {
			return s.AllocationMode == resourcev1.DeviceAllocationModeAll
		})
	}))
	t.admin += has(reqs(func(r *resourcev1.DeviceRequest) bool { return r.Exactly != nil && r.Exactly.AdminAccess != nil }))
	t.constraints += has(func() bool {
		return slices.ContainsFunc(c.Claims, func(cl *resourcev1.ResourceClaim) bool { return len(cl.Spec.Devices.Constraints) > 0 })
	})
	t.distinct += has(func() bool {
		return slices.ContainsFunc(c.Claims, func(cl *resourcev1.ResourceClaim) bool {
			return slices.ContainsFunc(cl.Spec.Devices.Constraints, func(con resourcev1.DeviceConstraint) bool { return con.DistinctAttribute != nil })
		})
	})
	t.shareable += has(func() bool {
		return slices.ContainsFunc(c.Slices, func(s *resourcev1.ResourceSlice) bool {
			return slices.ContainsFunc(s.Spec.Devices, func(d resourcev1.Device) bool {
				return d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
			})
		})
	})
	t.capReqs += has(reqs(func(r *resourcev1.DeviceRequest) bool {
		return (r.Exactly != nil && r.Exactly.Capacity != nil) ||
			slices.ContainsFunc(r.FirstAvailable, func(s resourcev1.DeviceSubRequest) bool { return s.Capacity != nil })
	}))
	t.shares += has(func() bool { return len(c.Shares) > 0 })
	t.holes += has(func() bool { return len(c.Holes) > 0 })
	t.counters += has(func() bool {
		return slices.ContainsFunc(c.Slices, func(s *resourcev1.ResourceSlice) bool { return len(s.Spec.SharedCounters) > 0 })
	})
	t.taints += has(func() bool {
		return slices.ContainsFunc(c.Slices, func(s *resourcev1.ResourceSlice) bool {
			return slices.ContainsFunc(s.Spec.Devices, func(d resourcev1.Device) bool { return len(d.Taints) > 0 })
		})
	})
	t.network += has(func() bool {
		return slices.ContainsFunc(c.Slices, func(s *resourcev1.ResourceSlice) bool { return s.Spec.NodeName == nil })
	})
	pools := checkerPools(c)
	t.incomplete += has(func() bool {
		for _, p := range pools {
			if p.incomplete != "" {
				return true
			}
		}
		return false
	})
	t.invalid += has(func() bool {
		for _, p := range pools {
			if p.invalid != "" {
				return true
			}
		}
		return false
	})
	t.oldGen += has(func() bool {
		return slices.ContainsFunc(c.Slices, func(s *resourcev1.ResourceSlice) bool { return s.Spec.Pool.Generation > 1 })
	})
}

func (t *tally) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cases, %d case×node comparisons: %d agree (fit %d, %d with shares; no fit %d of which upstream errors %d), %d upstream timeouts, %d allot timeouts, %d packing cases, %d admin-access differences, %d where upstream's variants differ, %d disagreements\n",
		t.cases, t.nodes, t.fits+t.noFits, t.fits, t.shareFits, t.noFits, t.upErrors, t.upTimeouts, t.alTimeouts, t.packing, t.difference, t.variants, t.disagreements)
	fmt.Fprintf(&b, "time: upstream %v (max %v), allot %v (max %v)\n", t.upTime.Round(time.Millisecond), t.upMax.Round(time.Millisecond), t.alTime.Round(time.Millisecond), t.alMax.Round(time.Millisecond))
	fmt.Fprintf(&b, "coverage (cases): firstAvailable %d, All %d, adminAccess %d, constraints %d (distinctAttribute %d), shared counters %d, taints %d, network-attached pools %d, holes %d, incomplete pools %d, invalid pools %d, older generations %d, shareable devices %d, capacity requests %d, shares held %d",
		t.firstAvailable, t.all, t.admin, t.constraints, t.distinct, t.counters, t.taints, t.network, t.holes, t.incomplete, t.invalid, t.oldGen,
		t.shareable, t.capReqs, t.shares)
	if len(t.byKind) > 0 {
		var ks []string
		for k, n := range t.byKind {
			ks = append(ks, fmt.Sprintf("%s=%d", k, n))
		}
		slices.Sort(ks)
		fmt.Fprintf(&b, "\nby kind: %s", strings.Join(ks, ", "))
	}
	return b.String()
}

// TestDifferential generates cases and compares allot's allocator with
// upstream's on every node of each.
func TestDifferential(t *testing.T) {
	n := *flagCases
	if *flagLong {
		n *= 40
	}
	first := 0
	if *flagCase >= 0 {
		first, n = *flagCase, *flagCase+1
	}
	if testing.Short() {
		n = min(n, first+200)
	}
	start := time.Now()
	tl := &tally{byKind: map[string]int{}}
	reported, allowed := map[string]int{}, map[string]int{}
	shrinkBudget := 2
	for i := first; i < n; i++ {
		c := genCase(*flagSeed, i)
		tl.coverage(c)
		for _, node := range c.Nodes {
			rep := compareNode(c, node)
			tl.add(rep)
			if *flagShow {
				t.Logf("case %d node %s: upstream %s (%v, %v), allot %s (%v) %s", i, node.Name, rep.up.kind, rep.up.err, rep.up.dur, rep.al.kind, rep.al.dur, rep.kind)
			}
			switch rep.verdict {
			case packing, difference, variants:
				// The first few of each kind in detail; the tally counts all.
				if allowed[rep.kind]++; allowed[rep.kind] <= 5 {
					t.Logf("ALLOWED case %d (seed %d) on %s: %s\n%s", i, *flagSeed, node.Name, rep.kind, rep.detail)
				}
			case timedOut:
				t.Logf("timeout: case %d (seed %d) on %s: %s (upstream %v, allot %v)", i, *flagSeed, node.Name, rep.kind, rep.up.dur, rep.al.dur)
			case disagreement:
				reported[rep.kind]++
				if reported[rep.kind] > 2 {
					t.Errorf("case %d (seed %d) on %s: %s (repeat, not shrunk; -dradiff.case=%d reproduces it)", i, *flagSeed, node.Name, rep.kind, i)
					continue
				}
				small := c
				if shrinkBudget > 0 {
					shrinkBudget--
					small = shrink(c, node.Name, rep.kind, 10*time.Second)
				}
				srep := compareNode(small, nodeByName(small, node.Name))
				if srep.verdict != disagreement {
					small, srep = c, rep // flaky reduction: show the original
				}
				t.Errorf("DISAGREEMENT case %d (seed %d, -dradiff.case=%d) on %s: %s\n%s\nreproduction (node %s):\n%s",
					i, *flagSeed, i, node.Name, srep.kind, srep.detail, node.Name, small.YAML())
			}
		}
	}
	t.Logf("seed %d: %v\nwall time %v", *flagSeed, tl, time.Since(start).Round(time.Millisecond))
}

func nodeByName(c *Case, name string) *k8scorev1.Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// hasShare reports whether an allocation has a share of a device.
func hasShare(results []*resourcev1.AllocationResult) bool {
	for _, a := range results {
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if r.ShareID != nil {
				return true
			}
		}
	}
	return false
}
