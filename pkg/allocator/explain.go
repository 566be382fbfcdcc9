package allocator

import (
	"fmt"
	"slices"
	"strings"

	"allot.dev/allot/pkg/allocator/engine"
)

// claimItems is the names of one claim's items that share a problem.
type claimItems struct {
	claim string
	names []string
}

// groupByClaim groups the items of driver d accepted by keep (nil: all) by
// claim, in item order.
func (r *Request) groupByClaim(d string, keep func(item) bool) []claimItems {
	var out []claimItems
	for _, it := range r.items[d] {
		if keep != nil && !keep(it) {
			continue
		}
		key := r.claims[it.claim].Key()
		if len(out) == 0 || out[len(out)-1].claim != key {
			out = append(out, claimItems{claim: key})
		}
		out[len(out)-1].names = append(out[len(out)-1].names, it.name)
	}
	return out
}

// explain turns a failed search into reasons. Kinds without any free
// candidate are explained clause by clause; otherwise the failure is a
// counting bound or, failing that, the partition rules.
func (r *Request) explain(d string, dm *driverModel, ds *driverState, masks []uint64, f *failure) []Reason {
	var out []Reason
	for k := range r.kinds[d] {
		free := 0
		for l, m := range masks {
			if m&(1<<k) != 0 && dm.free(ds, dm.leaves[l]) {
				free++
			}
		}
		if free > 0 {
			continue
		}
		code, clause, detail := r.explainKind(k, d, dm)
		out = joinReasons(out, r.reasonsFor(d, 1<<k, explanation{code, clause, detail}))
	}
	if len(out) > 0 {
		return out
	}
	if f != nil && f.mask != 0 {
		detail := fmt.Sprintf("%d instances needed, but at most %d matching instances can be allocated at the same time",
			f.need, f.capacity)
		return r.reasonsFor(d, f.mask, explanation{code: ReasonNotEnough, detail: detail})
	}
	for _, g := range r.groupByClaim(d, nil) {
		out = append(out, engine.NewReason(ReasonNoCombination, g.claim, d, g.names, "",
			"every request has candidates, but no combination satisfies all of them under the partition rules"))
	}
	return out
}

// clauseTally counts the instances one clause rejected.
type clauseTally struct {
	src     string
	class   bool
	count   int
	missing int
	errors  int
}

// reasonKey is one explanation of the items of some kinds of a driver.
type reasonKey struct {
	driver string
	kinds  uint64
	e      explanation
}

// reasonsFor returns the reasons, one per claim, of an explanation that
// applies to the items of driver d whose kind is in kinds. Many nodes
// share an explanation (every full node says the same), so the reasons
// are built once per Request.
func (r *Request) reasonsFor(d string, kinds uint64, e explanation) []Reason {
	key := reasonKey{driver: d, kinds: kinds, e: e}
	if v, ok := r.reasonMemo.Load(key); ok {
		return v.([]Reason)
	}
	var out []Reason
	for _, g := range r.groupByClaim(d, func(it item) bool { return kinds&(1<<it.kind) != 0 }) {
		out = append(out, engine.NewReason(e.code, g.claim, d, g.names, e.clause, e.detail))
	}
	out = slices.Clip(out)
	r.reasonMemo.Store(key, out)
	return out
}

// explanation is what explainKind says of a kind on a driver model.
type explanation struct {
	code           ReasonCode
	clause, detail string
}

// explainKind finds which clause is to blame when a kind has no free
// candidate. The answer depends only on the kind and the model, so it is
// remembered in the model.
func (r *Request) explainKind(k int, d string, dm *driverModel) (ReasonCode, string, string) {
	kd := r.kinds[d][k]
	key := kd.key + "\x02" + kd.class
	if e, ok := dm.explained.get(key); ok {
		return e.code, e.clause, e.detail
	}
	code, clause, detail := r.explainKindOnce(k, d, dm)
	dm.explained.put(key, explanation{code: code, clause: clause, detail: detail})
	return code, clause, detail
}

// explainKindOnce is explainKind without the memo. The selector's top-level conjuncts are evaluated one by one
// against every leaf, then, for leaves the selector accepts, the class
// filters' conjuncts; the first clause that is not true rejected the leaf.
// A class filter is blamed only when it rejects everything the selector
// accepts.
func (r *Request) explainKindOnce(k int, d string, dm *driverModel) (ReasonCode, string, string) {
	kd := r.kinds[d][k]
	var selTallies, filterTallies []*clauseTally
	var selClauses, filterClauses []*selector
	for _, c := range kd.sel.conjuncts() {
		selClauses = append(selClauses, c)
		selTallies = append(selTallies, &clauseTally{src: c.src})
	}
	for _, f := range kd.filters {
		for _, c := range f.conjuncts() {
			filterClauses = append(filterClauses, c)
			filterTallies = append(filterTallies, &clauseTally{src: c.src, class: true})
		}
	}
	selected, matched, unusable, tainted := 0, 0, 0, 0
	var taint DeviceRuleTaint
	for _, x := range dm.leaves {
		in := &dm.insts[x]
		if rejectedBy(selClauses, selTallies, in.vars) {
			continue
		}
		selected++
		if rejectedBy(filterClauses, filterTallies, in.vars) {
			continue
		}
		matched++
		switch {
		case in.tainted:
			if tainted == 0 {
				taint, _ = firstBlocking(in.taints)
			}
			tainted++
		case !in.ok:
			unusable++
		}
	}
	total := len(dm.leaves)
	switch {
	case total == 0:
		return ReasonNoMatch, "", "the node publishes no instances of this driver"
	case selected == 0:
		return ReasonNoMatch, topTally(selTallies).src, rejections("no instance matches", selTallies, total)
	case matched == 0:
		return ReasonClassFilter, topTally(filterTallies).src, rejections(
			fmt.Sprintf("the selector accepts %d of %d instances, the class %s rejects them", selected, total, kd.class),
			filterTallies, selected)
	}
	detail := fmt.Sprintf("%d of %d instances match", matched, total)
	if tainted > 0 {
		return explainTainted(detail, matched, unusable, tainted, taint)
	}
	if busy := matched - unusable; busy > 0 {
		detail += fmt.Sprintf(", %d allocated or locked by another partitioning of their device", busy)
	}
	if unusable > 0 {
		detail += fmt.Sprintf(", %d unhealthy or malformed", unusable)
	}
	if unusable == matched {
		return ReasonUnhealthy, "", detail
	}
	return ReasonInUse, "", detail
}

// rejectedBy evaluates clauses in order and tallies the first that is not
// true; it reports whether one was.
func rejectedBy(clauses []*selector, tallies []*clauseTally, vars *attrVars) bool {
	for i, c := range clauses {
		o := c.eval(vars)
		if o == outcomeTrue {
			continue
		}
		t := tallies[i]
		t.count++
		switch o {
		case outcomeMissing:
			t.missing++
		case outcomeCost, outcomeError:
			t.errors++
		}
		return true
	}
	return false
}

func topTally(tallies []*clauseTally) *clauseTally {
	var top *clauseTally
	for _, t := range tallies {
		if t.count > 0 && (top == nil || t.count > top.count) {
			top = t
		}
	}
	if top == nil {
		return &clauseTally{}
	}
	return top
}

// rejections says how many of total instances each clause rejected, the
// clause that rejected the most first: "...: 10 of 10 rejected by CLAUSE".
func rejections(lead string, tallies []*clauseTally, total int) string {
	top := topTally(tallies)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d rejected by ", lead, top.count, total)
	if top.class {
		b.WriteString("filter ")
	}
	b.WriteString(top.src)
	b.WriteString(tallyNote(top))
	for _, t := range tallies {
		if t == top || t.count == 0 {
			continue
		}
		fmt.Fprintf(&b, "; %d by %s%s", t.count, t.src, tallyNote(t))
	}
	return b.String()
}

func tallyNote(t *clauseTally) string {
	var notes []string
	if t.missing > 0 {
		notes = append(notes, fmt.Sprintf("attribute missing on %d", t.missing))
	}
	if t.errors > 0 {
		notes = append(notes, fmt.Sprintf("evaluation failed on %d", t.errors))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

// explainTainted is explainKindOnce's answer when DeviceTaintRules keep
// some matching leaves from seed claims (which tolerate no taint): the
// taint is to blame when, without it, a matching leaf would be free of
// health problems.
func explainTainted(detail string, matched, unusable, tainted int, taint DeviceRuleTaint) (ReasonCode, string, string) {
	if busy := matched - unusable - tainted; busy > 0 {
		detail += fmt.Sprintf(", %d allocated or locked by another partitioning of their device", busy)
	}
	if unusable > 0 {
		detail += fmt.Sprintf(", %d unhealthy or malformed", unusable)
	}
	detail += fmt.Sprintf(", %d tainted by DeviceTaintRules, which seed claims cannot tolerate, such as %s", tainted, taint)
	if unusable+tainted == matched {
		return ReasonTainted, taint.String(), detail
	}
	return ReasonInUse, "", detail
}
