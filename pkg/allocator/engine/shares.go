package engine

// Consumable capacity, where shares are counted and judged: the one
// state's shares per device (State), a node's shareable devices in the
// search (v1prob); the v1 front end derives share IDs (v1shareid.go). The rules of a share are in capacity.go.

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// capUsed returns what the shares of a device hold in the state.
func (s *State) capUsed(x int32) v1shares {
	u, _ := s.shares.Get(x)
	return u
}

// v1shares is what the shares of one device hold: how many, and the sum
// of their consumption per capacity (sorted by name, in its units; nil
// while no share consumes anything).
type v1shares struct {
	n       int32
	amounts []int64
}

// applyShare counts one share of device x (canon) in or out.
func (s *State) applyShare(x int32, consumed map[resourcev1.QualifiedName]resource.Quantity, sign int32) {
	u, _ := s.shares.Get(x)
	if sign < 0 && u.n == 0 {
		return
	}
	out := v1shares{n: u.n + sign}
	if s.inv.devs[x].caps != nil {
		caps := s.inv.devs[x].caps
		out.amounts = make([]int64, len(caps))
		copy(out.amounts, u.amounts)
		for i := range caps {
			q, ok := consumed[caps[i].Name]
			if !ok {
				continue
			}
			out.amounts[i] = AddSat(out.amounts[i], int64(sign)*caps[i].amount(&q))
		}
	}
	if out.n <= 0 {
		s.shares.Del(x)
		return
	}
	s.shares.Set(x, out)
}

// capacityClause says why a share does not fit a device: the first
// capacity without room, "capacity NAME of DEVICE: requests X, Y of Z
// left".
func capacityClause(dev string, caps []ShareCap, left, want []int64) string {
	for i := range caps {
		if want[i] > left[i] {
			c := &caps[i]
			asks := c.format(want[i])
			if want[i] == AmountNever {
				asks = "more than " + c.dc.Value.String()
			}
			return fmt.Sprintf("capacity %s of %s: requests %s, %s of %s left", c.Name, dev, asks, c.format(max(left[i], 0)), c.dc.Value.String())
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
	sh := p.st.capUsed(d.canon)
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
	consumed, amounts, ok := v1CapacityFits(a.a.CapReqs, d.d.Capacity, d.caps, d.multi)
	pool := &p.inv.pools[d.pool]
	if !ok {
		st.capacity++
		if st.capClause == "" {
			st.capClause = fmt.Sprintf("%s/%s/%s cannot serve the request's capacity.requests %s (not published, above the capacity or outside its requestPolicy)",
				pool.Driver, pool.Name, d.d.Name, v1FormatRequests(a.a.CapReqs))
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
	if !a.a.All && !fitsIn64(amounts, p.capLeft0[l]) {
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

// Shares returns how many shares of a device (results with a shareID)
// the state holds, and what they consume together, per capacity the
// device publishes (nil when the inventory does not know the device as
// one that allows multiple allocations).
func (s *State) Shares(driver, pool, device string) (int, map[resourcev1.QualifiedName]resource.Quantity) {
	x, known := s.inv.lookup(driver, pool, device)
	if !known {
		u, _ := s.unknown.Get(v1Key(driver, pool, device))
		return int(u.shares), nil
	}
	sh := s.capUsed(x)
	if s.inv.devs[x].caps == nil {
		return int(sh.n), nil
	}
	caps := s.inv.devs[x].caps
	out := make(map[resourcev1.QualifiedName]resource.Quantity, len(caps))
	for i := range caps {
		var v int64
		if i < len(sh.amounts) {
			v = sh.amounts[i]
		}
		out[caps[i].Name] = *resource.NewScaledQuantity(v, caps[i].scale)
	}
	return int(sh.n), out
}
