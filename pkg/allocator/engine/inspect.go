package engine

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
)

// What tools that explain an answer, and white-box tests, read of an
// inventory and a state: devices by index (the index a Solution names),
// their counters in the inventory's units, the constraint values the
// search compares. All of it is read-only.

// Len returns the number of devices; their indexes are 0 to Len()-1.
func (inv *Inventory) Len() int { return len(inv.devs) }

// Lookup returns the index of the device of a driver, pool and name, if
// the inventory has it.
func (inv *Inventory) Lookup(driver, pool, device string) (int32, bool) {
	x, ok := inv.lookup(driver, pool, device)
	return x, ok
}

// At returns device x and its pool.
func (inv *Inventory) At(x int32) (*Pool, *Device) {
	d := &inv.devs[x]
	return &inv.pools[d.pool], d.d
}

// ShareCaps returns the capacities of device x in the order of a share's
// consumed quantities (SolDev.Consumed), for a device that allows
// multiple allocations.
func (inv *Inventory) ShareCaps(x int32) []ShareCap { return inv.devs[x].caps }

// Uses returns what device x consumes of the inventory's counters
// (indexes into Counters), in the counters' units.
func (inv *Inventory) Uses(x int32) []CounterUse { return inv.devs[x].uses }

// Counters returns every shared counter of every pool.
func (inv *Inventory) Counters() []Counter { return inv.ctrs }

// ConstraintValue is the value a matchAttribute or distinctAttribute
// constraint compares for device x: "" when the device lacks the
// attribute.
func (inv *Inventory) ConstraintValue(x int32, attr resourcev1.FullyQualifiedName) string {
	return v1AttrKey(&inv.devs[x], attr, int(x))
}

// Probe runs the first search alone (every alternative open, no branch
// and bound): whether something fits on the node and how many steps
// deciding it took, the measure of a search's budget. Reasons come back
// when the problem cannot be set up (a selector fails to evaluate).
func (r *Request) Probe(ctx context.Context, st *State, node *Node) (found bool, steps int, reasons []Reason, err error) {
	p, rs := r.setup(st, node)
	if len(rs) > 0 {
		return false, 0, rs, nil
	}
	defer p.release()
	s := p.newSearch(ctx, p.openFixed(), 0)
	err = s.run()
	return s.found, s.steps, nil, err
}
