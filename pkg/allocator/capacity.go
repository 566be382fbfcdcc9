package allocator

// Capacity in the plain recursive form: how many leaves can be allocated at
// the same time. It scores nodes, rates the seed search's candidates
// (per root, seedView) and bounds it (seedBound).

// free reports whether leaf x can be allocated in state ds: it is usable
// and unused, and no ancestor is used or locked to a group off its path.
func (dm *driverModel) free(ds *driverState, x int32) bool {
	if !dm.insts[x].ok {
		return false
	}
	if ds == nil {
		return true
	}
	if ds.used[x] > 0 {
		return false
	}
	for g := dm.insts[x].parent; g >= 0; {
		owner := dm.groups[g].owner
		if ds.used[owner] > 0 {
			return false
		}
		for _, other := range dm.insts[owner].groups {
			if other != g && ds.lock[other] > 0 {
				return false
			}
		}
		g = dm.insts[owner].parent
	}
	return true
}

// capacityOf is the number of leaves of dm that can be allocated at the
// same time in state ds (nil: empty), counting leaves matching mask only
// when matches is not nil. It is the plain recursive definition, used for
// scores and as the reference in tests.
func (dm *driverModel) capacityOf(ds *driverState, matches []uint64, mask uint64) int {
	total := 0
	for _, r := range dm.roots {
		total += dm.instCapacity(ds, r, matches, mask)
	}
	return total
}

func (dm *driverModel) instCapacity(ds *driverState, x int32, matches []uint64, mask uint64) int {
	in := &dm.insts[x]
	if !in.ok || (ds != nil && ds.used[x] > 0) {
		return 0
	}
	if in.leaf >= 0 {
		if matches != nil && matches[in.leaf]&mask == 0 {
			return 0
		}
		return 1
	}
	best, locked := 0, 0
	for _, g := range in.groups {
		sum := 0
		for _, c := range dm.groups[g].children {
			sum += dm.instCapacity(ds, c, matches, mask)
		}
		if ds != nil && ds.lock[g] > 0 {
			locked++
			best = sum
			continue
		}
		if locked == 0 {
			best = max(best, sum)
		}
	}
	if locked > 1 {
		return 0
	}
	return best
}

// Capacity is how many instances of the node (all drivers) can be allocated
// at the same time in this state, choosing partition schemes to maximize the
// count. It is computed once per state.
func (s *NodeState) Capacity() int {
	s.capOnce.Do(func() {
		for d, dm := range s.model.drivers {
			s.capTotal += dm.capacityOf(s.drivers[d], nil, 0)
		}
	})
	return s.capTotal
}
