package allocator

// Consumable capacity (DRAConsumableCapacity, with
// DRAFractionalCapacityRange; both beta and on in Kubernetes 1.37): a
// device with allowMultipleAllocations is allocated as shares. Each share
// consumes, per capacity of the device, the request's capacity.requests
// value rounded up by the capacity's requestPolicy (or the policy's
// default when the request names no value, or the whole capacity when
// neither); the shares of a device never consume more than its capacity.
// The rules are upstream's (k8s.io/dynamic-resource-allocation/structured,
// the incubating allocator's consumable_capacity.go), the arithmetic the
// counters' (int64 units of a per-capacity scale, v1allocinv.go).

import (
	"crypto/sha1"
	"fmt"
	"math"
	"math/big"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonCapacity: devices match, but none that could take the request
// has enough of a consumable capacity left (shares of a device with
// allowMultipleAllocations); Clause names the capacity.
const ReasonCapacity ReasonCode = "CapacityExhausted"

// v1cap is one capacity of a device with allowMultipleAllocations, in
// the units the state sums shares in: 10^scale, chosen as for counters
// (v1CounterScale) from the capacity and its policy's values, so that the
// capacity and every share up to it stay below 2^50 units.
type v1cap struct {
	name  resourcev1.QualifiedName
	total int64
	scale resource.Scale
	dc    *resourcev1.DeviceCapacity
}

// v1Caps returns the capacities of a device with allowMultipleAllocations,
// sorted by name (the order of share amounts everywhere).
func v1Caps(capacity map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) []v1cap {
	names := sortedKeys(capacity)
	out := make([]v1cap, len(names))
	for i, n := range names {
		dc := capacity[n]
		vals := []resource.Quantity{dc.Value}
		if p := dc.RequestPolicy; p != nil {
			if p.Default != nil {
				vals = append(vals, *p.Default)
			}
			vals = append(vals, p.ValidValues...)
			if r := p.ValidRange; r != nil {
				for _, q := range []*resource.Quantity{r.Min, r.Max, r.Step} {
					if q != nil && q.Cmp(dc.Value) <= 0 {
						vals = append(vals, *q)
					}
				}
			}
		}
		scale := v1CounterScale(vals)
		out[i] = v1cap{name: n, total: v1Floor(&dc.Value, scale), scale: scale, dc: &dc}
	}
	return out
}

// amount is a share's consumption of the capacity in its units: v1Never
// above the capacity.
func (c *v1cap) amount(q *resource.Quantity) int64 {
	if q.Cmp(c.dc.Value) > 0 {
		return v1Never
	}
	return v1Ceil(q, c.scale)
}

// format writes an amount of the capacity as a quantity.
func (c *v1cap) format(v int64) string {
	q := resource.NewScaledQuantity(v, c.scale)
	q.Format = c.dc.Value.Format
	return q.String()
}

// v1CapacityFits reports whether a request's capacity.requests (nil: none)
// can be served by a device on its own, nothing else allocated, as
// upstream's static check: every capacity the request names exists on
// the device, and for every capacity of the device the amount the request
// consumes (v1Consumed) keeps its policy and is at most the capacity.
// For a device with allowMultipleAllocations it also returns that
// consumption, per capacity (sorted by name), as quantities and in the
// capacities' units.
func v1CapacityFits(reqs map[resourcev1.QualifiedName]resource.Quantity, capacity map[resourcev1.QualifiedName]resourcev1.DeviceCapacity,
	caps []v1cap, multi bool) (consumed []resource.Quantity, amounts []int64, ok bool) {
	for n := range reqs {
		if _, found := capacity[n]; !found {
			return nil, nil, false
		}
	}
	if !multi {
		// Without requestPolicy (only shareable devices may have one) a
		// device serves what it has; a request without values, the whole.
		for n, q := range reqs {
			if q.Sign() < 0 || q.Cmp(capacity[n].Value) > 0 {
				return nil, nil, false
			}
		}
		return nil, nil, true
	}
	consumed = make([]resource.Quantity, len(caps))
	amounts = make([]int64, len(caps))
	for i := range caps {
		c := &caps[i]
		var req *resource.Quantity
		if q, found := reqs[c.name]; found {
			req = &q
		}
		q, good := v1Consumed(req, c.dc)
		if !good || q.Cmp(c.dc.Value) > 0 {
			return nil, nil, false
		}
		consumed[i], amounts[i] = q, c.amount(&q)
	}
	return consumed, amounts, true
}

// v1Consumed is what a share consumes of a capacity (upstream's
// calculateConsumedCapacity, then violatesPolicy): without a request
// value, the policy's default or else the whole capacity; with one and a
// validRange, min when below it, else rounded up to min plus a multiple
// of step; with validValues, the smallest valid value at least the
// request. ok is false when the amount breaks the policy (above the
// range's max or every valid value, off the step grid) or cannot be
// computed (negative, or beyond what upstream's arithmetic represents).
func v1Consumed(req *resource.Quantity, dc *resourcev1.DeviceCapacity) (q resource.Quantity, ok bool) {
	p := dc.RequestPolicy
	switch {
	case req == nil && p != nil && p.Default != nil:
		q = p.Default.DeepCopy()
	case req == nil:
		q = dc.Value.DeepCopy()
	case p == nil:
		q = req.DeepCopy()
	case p.ValidRange != nil && p.ValidRange.Min != nil:
		var good bool
		if q, good = v1RoundUpRange(req, p.ValidRange); !good {
			return q, false
		}
	case p.ValidValues != nil:
		q = req.DeepCopy()
		for _, v := range p.ValidValues {
			if req.Cmp(v) <= 0 {
				q = v.DeepCopy()
				break
			}
		}
	default:
		q = req.DeepCopy()
	}
	if q.Sign() < 0 {
		return q, false
	}
	return q, !v1ViolatesPolicy(q, p)
}

// v1RoundUpRange rounds a request up into a validRange: min when below
// it, else min plus the least whole number of steps reaching it, exactly
// (milli-units when exact there, else math/big), in the step's format.
// Upstream computes the same in int64 units or milli-units
// (DRAFractionalCapacityRange) and refuses a request it cannot represent
// there; so does this.
func v1RoundUpRange(req *resource.Quantity, r *resourcev1.CapacityRequestPolicyRange) (resource.Quantity, bool) {
	if req.Cmp(*r.Min) < 0 {
		return r.Min.DeepCopy(), true
	}
	if r.Step == nil {
		return req.DeepCopy(), true
	}
	if r.Step.Sign() <= 0 {
		return resource.Quantity{}, false
	}
	if q, ok, exact := v1RoundUpMilli(req, r); exact {
		return q, ok
	}
	minR, stepR := ratOfQuantity(r.Min), ratOfQuantity(r.Step)
	added := new(big.Rat).Sub(ratOfQuantity(req), minR)
	n := new(big.Rat).Quo(added, stepR)
	steps := new(big.Int).Quo(n.Num(), n.Denom())
	if !n.IsInt() {
		steps.Add(steps, big.NewInt(1))
	}
	val := new(big.Rat).Add(minR, new(big.Rat).Mul(new(big.Rat).SetInt(steps), stepR))
	// Upstream computes in milli-units when min, max and step all are
	// whole milli-units within int64 (DRAFractionalCapacityRange), else
	// in units; a request or result it cannot represent there aborts its
	// allocation. Here such a request is one the device cannot serve.
	maxInt := new(big.Rat).SetInt64(math.MaxInt64)
	if v1RangeInMilli(r) {
		milli := new(big.Rat).Mul(val, big.NewRat(1000, 1))
		reqMilli := new(big.Rat).Mul(ratOfQuantity(req), big.NewRat(1000, 1))
		if !milli.IsInt() || milli.Cmp(maxInt) > 0 || !reqMilli.IsInt() {
			return resource.Quantity{}, false
		}
		m := milli.Num().Int64()
		if m%1000 == 0 {
			return *resource.NewQuantity(m/1000, r.Step.Format), true
		}
		return *resource.NewMilliQuantity(m, r.Step.Format), true
	}
	if val.Cmp(maxInt) > 0 || ratOfQuantity(req).Cmp(maxInt) > 0 {
		return resource.Quantity{}, false
	}
	if val.IsInt() {
		return *resource.NewQuantity(val.Num().Int64(), r.Step.Format), true
	}
	out, err := resource.ParseQuantity(val.FloatString(9))
	return out, err == nil
}

// v1RangeInMilli reports whether upstream rounds by the range in
// milli-units: min, max and step are whole milli-units within int64, the
// step at least one.
func v1RangeInMilli(r *resourcev1.CapacityRequestPolicyRange) bool {
	maxInt := new(big.Rat).SetInt64(math.MaxInt64)
	for _, q := range []*resource.Quantity{r.Min, r.Max, r.Step} {
		if q == nil {
			continue
		}
		m := new(big.Rat).Mul(ratOfQuantity(q), big.NewRat(1000, 1))
		if !m.IsInt() || m.Cmp(maxInt) > 0 || m.Cmp(new(big.Rat).Neg(maxInt)) < 0 {
			return false
		}
	}
	return r.Step == nil || ratOfQuantity(r.Step).Cmp(big.NewRat(1, 1000)) >= 0
}

// v1Milli returns q in milli-units when that is exact and far from
// int64's ends (|q| < 2^52 milli), which covers every quantity people
// write for a capacity; else false (the caller computes exactly).
func v1Milli(q *resource.Quantity) (int64, bool) {
	const limit = int64(1) << 52
	if v, ok := q.AsInt64(); ok {
		if v > -limit/1000 && v < limit/1000 {
			return v * 1000, true
		}
		return 0, false
	}
	if q.CmpInt64(limit/1000) >= 0 || q.CmpInt64(-limit/1000) <= 0 {
		return 0, false
	}
	m := q.MilliValue()
	if q.Cmp(*resource.NewMilliQuantity(m, q.Format)) != 0 {
		return 0, false
	}
	return m, true
}

// v1RoundUpMilli is v1RoundUpRange in milli-units, for a request, min and
// step exact there (exact false otherwise: compute with math/big). Its
// result is the same number.
func v1RoundUpMilli(req *resource.Quantity, r *resourcev1.CapacityRequestPolicyRange) (q resource.Quantity, ok, exact bool) {
	rm, ok1 := v1Milli(req)
	mm, ok2 := v1Milli(r.Min)
	sm, ok3 := v1Milli(r.Step)
	if !ok1 || !ok2 || !ok3 || sm <= 0 || rm < mm {
		return q, false, false
	}
	n := (rm - mm) / sm
	if (rm-mm)%sm != 0 {
		n++
	}
	v := mm + n*sm // below 2^53: every term is below 2^52
	if v%1000 == 0 {
		return *resource.NewQuantity(v/1000, r.Step.Format), true, true
	}
	return *resource.NewMilliQuantity(v, r.Step.Format), true, true
}

// ratOfQuantity is q exactly.
func ratOfQuantity(q *resource.Quantity) *big.Rat {
	d := q.AsDec()
	r := new(big.Rat).SetInt(d.UnscaledBig())
	if s := int64(d.Scale()); s > 0 {
		r.Quo(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(s), nil)))
	} else if s < 0 {
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(-s), nil)))
	}
	return r
}

// v1ViolatesPolicy is upstream's violatesPolicy: the policy's default is
// always valid; else above validRange.max or off its step grid, or not
// one of validValues.
func v1ViolatesPolicy(q resource.Quantity, p *resourcev1.CapacityRequestPolicy) bool {
	if p == nil || (p.Default != nil && q.Cmp(*p.Default) == 0) {
		return false
	}
	switch {
	case p.ValidRange != nil:
		r := p.ValidRange
		if r.Max != nil && q.Cmp(*r.Max) > 0 {
			return true
		}
		if r.Step != nil && r.Min != nil && r.Step.Sign() > 0 {
			qm, ok1 := v1Milli(&q)
			mm, ok2 := v1Milli(r.Min)
			sm, ok3 := v1Milli(r.Step)
			if ok1 && ok2 && ok3 && sm > 0 && qm >= mm {
				return (qm-mm)%sm != 0
			}
			d := new(big.Rat).Sub(ratOfQuantity(&q), ratOfQuantity(r.Min))
			return !d.Quo(d, ratOfQuantity(r.Step)).IsInt()
		}
	case len(p.ValidValues) > 0:
		for _, v := range p.ValidValues {
			if q.Cmp(v) == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// v1CapacityRequests returns an alternative's capacity.requests, nil for
// none.
func v1CapacityRequests(c *resourcev1.CapacityRequirements) map[resourcev1.QualifiedName]resource.Quantity {
	if c == nil || len(c.Requests) == 0 {
		return nil
	}
	return c.Requests
}

// capUsed returns what the shares of a device hold in the state.
func (s *V1State) capUsed(key string) v1shares {
	u, _ := s.shares.get(key)
	return u
}

// v1shares is what the shares of one device hold: how many, and the sum
// of their consumption per capacity (sorted by name, in its units; nil
// while no share consumes anything).
type v1shares struct {
	n       int32
	amounts []int64
}

// applyShare counts one share of a device in or out.
func (s *V1State) applyShare(key string, x int32, known bool, consumed map[resourcev1.QualifiedName]resource.Quantity, sign int32) {
	u, _ := s.shares.get(key)
	if sign < 0 && u.n == 0 {
		return
	}
	out := v1shares{n: u.n + sign}
	if known && s.inv.devs[x].caps != nil {
		caps := s.inv.devs[x].caps
		out.amounts = make([]int64, len(caps))
		copy(out.amounts, u.amounts)
		for i := range caps {
			q, ok := consumed[caps[i].name]
			if !ok {
				continue
			}
			out.amounts[i] = v1AddSat(out.amounts[i], int64(sign)*caps[i].amount(&q))
		}
	}
	if out.n <= 0 {
		s.shares.del(key)
		return
	}
	s.shares.set(key, out)
}

// capacityClause says why a share does not fit a device: the first
// capacity without room, "capacity NAME of DEVICE: requests X, Y of Z
// left".
func capacityClause(dev string, caps []v1cap, left, want []int64) string {
	for i := range caps {
		if want[i] > left[i] {
			c := &caps[i]
			asks := c.format(want[i])
			if want[i] == v1Never {
				asks = "more than " + c.dc.Value.String()
			}
			return fmt.Sprintf("capacity %s of %s: requests %s, %s of %s left", c.name, dev, asks, c.format(max(left[i], 0)), c.dc.Value.String())
		}
	}
	return ""
}

// setupShared reads a shareable device's state: it is in use (for new
// shares too) only through an allocation that is not a share; what its
// capacities have left; whether it has shares (its counters are then
// consumed already).
func (p *v1prob) setupShared(l int, d *v1dev, used int32) {
	if p.capLeft0 == nil {
		n := len(p.devs)
		p.capLeft0, p.shared0 = make([][]int64, n), make([]bool, n)
		p.anyMulti = true
	}
	sh := p.st.capUsed(d.key)
	p.inUse[l] = used > sh.n
	p.shared0[l] = sh.n > 0
	left := make([]int64, len(d.caps))
	for i := range d.caps {
		left[i] = d.caps[i].total
		if i < len(sh.amounts) {
			left[i] -= sh.amounts[i]
		}
	}
	p.capLeft0[l] = left
}

// capacityCandidate applies the capacity rules to a matching, tolerated
// device: the request's capacity.requests must be servable by the device
// alone (upstream's static check; a device that cannot serve them is no
// candidate, and not one of an All request's devices either), and a
// share of a shareable device must fit what its capacities have left
// (without admin access and for All requests this is checked in the
// search and by checkAll).
func (p *v1prob) capacityCandidate(a *v1salt, l int32, d *v1dev) bool {
	st := &a.stats
	consumed, amounts, ok := v1CapacityFits(a.a.capReqs, d.d.Capacity, d.caps, d.multi)
	pool := &p.inv.pools[d.pool]
	if !ok {
		st.capacity++
		if st.capClause == "" {
			st.capClause = fmt.Sprintf("%s/%s/%s cannot serve the request's capacity.requests %s (not published, above the capacity or outside its requestPolicy)",
				pool.Driver, pool.Name, d.d.Name, v1FormatRequests(a.a.capReqs))
		}
		return false
	}
	if !d.multi {
		return true
	}
	if a.share == nil {
		a.share, a.consumed = map[int32][]int64{}, map[int32][]resource.Quantity{}
	}
	a.share[l], a.consumed[l] = amounts, consumed
	if !a.a.all && !fitsIn64(amounts, p.capLeft0[l]) {
		st.capacity++
		if st.capClause == "" {
			st.capClause = capacityClause(pool.Driver+"/"+pool.Name+"/"+d.d.Name, d.caps, p.capLeft0[l], amounts)
		}
		return false
	}
	return true
}

// fitsIn64 reports whether a share fits what is left, capacity by
// capacity.
func fitsIn64(want, left []int64) bool {
	for i := range want {
		if want[i] > left[i] {
			return false
		}
	}
	return true
}

// v1FormatRequests writes capacity.requests in name order.
func v1FormatRequests(reqs map[resourcev1.QualifiedName]resource.Quantity) string {
	if len(reqs) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, n := range sortedKeys(reqs) {
		if i > 0 {
			b.WriteString(", ")
		}
		q := reqs[n]
		fmt.Fprintf(&b, "%s: %s", n, q.String())
	}
	return b.String()
}

// v1ShareID names one share: a UUID (version 5 layout, SHA-1) of the
// claim (its UID, else namespace/name), the request and the device.
// Upstream draws a random UUID; this one is derived so that equal inputs
// give equal outputs. It is unique where it must be: shares of one
// device come from different claims or, within a claim, from different
// requests (a request takes a device once).
func v1ShareID(c *resourcev1.ResourceClaim, request, deviceKey string) types.UID {
	h := sha1.New()
	id := string(c.UID)
	if id == "" {
		id = c.Namespace + "/" + c.Name
	}
	for _, part := range []string{"allot.dev/share", id, request, deviceKey} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]))
}

// Shares returns how many shares of a device (results with a shareID)
// the state holds, and what they consume together, per capacity the
// device publishes (nil when the inventory does not know the device as
// one that allows multiple allocations).
func (s *V1State) Shares(driver, pool, device string) (int, map[resourcev1.QualifiedName]resource.Quantity) {
	key := v1Key(driver, pool, device)
	sh := s.capUsed(key)
	x, known := s.inv.byKey[key]
	if !known || s.inv.devs[x].caps == nil {
		return int(sh.n), nil
	}
	caps := s.inv.devs[x].caps
	out := make(map[resourcev1.QualifiedName]resource.Quantity, len(caps))
	for i := range caps {
		var v int64
		if i < len(sh.amounts) {
			v = sh.amounts[i]
		}
		out[caps[i].name] = *resource.NewScaledQuantity(v, caps[i].scale)
	}
	return int(sh.n), out
}
