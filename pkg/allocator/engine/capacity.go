package engine

// Consumable capacity (DRAConsumableCapacity, with
// DRAFractionalCapacityRange; both beta and on in Kubernetes 1.37): a
// device with allowMultipleAllocations is allocated as shares. Each share
// consumes, per capacity of the device, the request's capacity.requests
// value rounded up by the capacity's requestPolicy (or the policy's
// default when the request names no value, or the whole capacity when
// neither); the shares of a device never consume more than its capacity.
// The rules are upstream's (k8s.io/dynamic-resource-allocation/structured,
// the incubating allocator's consumable_capacity.go), the arithmetic the
// counters' (int64 units of a per-capacity scale, inventory.go).

import (
	"math"
	"math/big"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// v1cap is one capacity of a device with allowMultipleAllocations, in
// the units the state sums shares in: 10^scale, chosen as for counters
// (v1CounterScale, but from nano up) from the capacity and its policy's
// values, so that the capacity and every share up to it stay below 2^50
// units. A share finer than that is rounded up (against the allocation).
type ShareCap struct {
	Name  resourcev1.QualifiedName
	total int64
	scale resource.Scale
	dc    *resourcev1.DeviceCapacity
}

// v1Caps returns the capacities of a device with allowMultipleAllocations,
// sorted by name (the order of share amounts everywhere).
func v1Caps(capacity map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) []ShareCap {
	names := sortedKeys(capacity)
	out := make([]ShareCap, len(names))
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
		// From nano up (quantities are never finer), so that capacities
		// like 1.0001 are exact.
		scale := v1ScaleFrom(resource.Nano, vals)
		out[i] = ShareCap{Name: n, total: v1Floor(&dc.Value, scale), scale: scale, dc: &dc}
	}
	return out
}

// amount is a share's consumption of the capacity in its units: v1Never
// above the capacity.
func (c *ShareCap) amount(q *resource.Quantity) int64 {
	if q.Cmp(c.dc.Value) > 0 {
		return AmountNever
	}
	return v1Ceil(q, c.scale)
}

// format writes an amount of the capacity as a quantity.
func (c *ShareCap) format(v int64) string {
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
	caps []ShareCap, multi bool) (consumed []resource.Quantity, amounts []int64, ok bool) {
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
		if q, found := reqs[c.Name]; found {
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

// CapacityRequests returns an alternative's capacity.requests, nil for
// none.
func CapacityRequests(c *resourcev1.CapacityRequirements) map[resourcev1.QualifiedName]resource.Quantity {
	if c == nil || len(c.Requests) == 0 {
		return nil
	}
	return c.Requests
}
