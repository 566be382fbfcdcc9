package allocator

import (
	"slices"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
)

// V1State is what of a V1Inventory is in use: the devices allocated to v1
// claims (by driver, pool and device name, cluster-wide: a device that is
// not local to a node is one device for every node), the seed leaves
// allocated to v1alpha2 claims (their structured handles: pool = the
// handle's nodeName, device = SeedDeviceName(instance ID)), the seed
// instances those hold (so that partition locks hold across both APIs),
// and the shared counters the allocated devices consume.
//
// Admin-access results do not count as in use. A device allocated twice
// (inconsistent input) counts once for counters and partition locks, and
// stays in use until both allocations are removed.
//
// A V1State is immutable; WithAllocated and WithoutAllocated return new
// states sharing the rest (copy-on-write maps whose own part is folded
// into a new shared base once it outgrows a sixteenth of it).
// Safe for concurrent reads.
type V1State struct {
	inv      *V1Inventory
	used     *layered[string, int32]    // device key → allocations
	consumed *layered[int32, int64]     // counter → consumed, in its scale
	seedUsed *layered[string, []string] // driver\x00pool → seed instance IDs in use
}

// NewV1State returns the state of inv with the v1 claims and the v1alpha2
// claims allocated (claims without an allocation are skipped).
func NewV1State(inv *V1Inventory, v1Claims []*resourcev1.ResourceClaim, seedClaims []*resourceapi.ResourceClaim) *V1State {
	s := &V1State{inv: inv, used: newLayered(map[string]int32{}), consumed: newLayered(map[int32]int64{}),
		seedUsed: newLayered(map[string][]string{})}
	for _, c := range v1Claims {
		s.applyV1(c, 1)
	}
	for _, c := range seedClaims {
		s.applySeed(c, 1)
	}
	// Fold the deltas once, so that derived states start from flat maps.
	s.used.fold()
	s.consumed.fold()
	s.seedUsed.fold()
	return s
}

// Inventory returns the inventory the state is about.
func (s *V1State) Inventory() *V1Inventory { return s.inv }

// WithAllocated returns the state with the v1 claims' allocations added.
func (s *V1State) WithAllocated(claims ...*resourcev1.ResourceClaim) *V1State {
	return s.WithChanges(nil, claims, nil, nil)
}

// WithoutAllocated returns the state with the v1 claims' allocations
// removed.
func (s *V1State) WithoutAllocated(claims ...*resourcev1.ResourceClaim) *V1State {
	return s.WithChanges(claims, nil, nil, nil)
}

// WithSeedAllocated and WithoutSeedAllocated do the same for v1alpha2
// claims, whose seed leaves are devices of the projected pools.
func (s *V1State) WithSeedAllocated(claims ...*resourceapi.ResourceClaim) *V1State {
	return s.WithChanges(nil, nil, nil, claims)
}

func (s *V1State) WithoutSeedAllocated(claims ...*resourceapi.ResourceClaim) *V1State {
	return s.WithChanges(nil, nil, claims, nil)
}

// WithChanges returns the state after claim changes, in one step: the
// allocations of removeV1 and removeSeed (v1 and v1alpha2 claims the state
// counted) taken out, those of addV1 and addSeed put in. A scheduler
// derives the state of its next listing from the last one this way
// instead of counting every claim again.
func (s *V1State) WithChanges(removeV1, addV1 []*resourcev1.ResourceClaim, removeSeed, addSeed []*resourceapi.ResourceClaim) *V1State {
	out := s.clone()
	for _, c := range removeV1 {
		out.applyV1(c, -1)
	}
	for _, c := range removeSeed {
		out.applySeed(c, -1)
	}
	for _, c := range addV1 {
		out.applyV1(c, 1)
	}
	for _, c := range addSeed {
		out.applySeed(c, 1)
	}
	return out
}

// InUse reports whether the device is allocated (admin access aside).
func (s *V1State) InUse(driver, pool, device string) bool {
	n, _ := s.used.get(v1Key(driver, pool, device))
	return n > 0
}

// clone returns a state to change in place. It copies the small deltas
// of the maps (layered.with), never touching s, which other goroutines may
// be reading or deriving from at the same time.
func (s *V1State) clone() *V1State {
	return &V1State{inv: s.inv, used: s.used.with(nil, nil), consumed: s.consumed.with(nil, nil), seedUsed: s.seedUsed.with(nil, nil)}
}

func (s *V1State) applyV1(c *resourcev1.ResourceClaim, sign int32) {
	if c == nil || c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		s.apply(r.Driver, r.Pool, r.Device, "", sign)
	}
}

func (s *V1State) applySeed(c *resourceapi.ResourceClaim, sign int32) {
	if c == nil || c.Status.Allocation == nil {
		return
	}
	for _, h := range c.Status.Allocation.ResourceHandles {
		sd := h.StructuredData
		if sd == nil || sd.Partitionable == nil {
			continue
		}
		for _, in := range sd.Partitionable.Instances {
			s.apply(h.DriverName, sd.NodeName, SeedDeviceName(in.ID), in.ID, sign)
		}
	}
}

// apply counts one allocation of a device in or out. instance is the seed
// instance ID when the allocation names one (v1alpha2); for a device of
// the inventory the inventory's is used. Counters and seed locks change
// when the device goes from unused to used and back.
func (s *V1State) apply(driver, pool, device, instance string, sign int32) {
	key := v1Key(driver, pool, device)
	n, _ := s.used.get(key)
	switch {
	case sign > 0:
		s.used.set(key, n+1)
		if n > 0 {
			return
		}
	case n == 0:
		return
	case n > 1:
		s.used.set(key, n-1)
		return
	default:
		s.used.del(key)
	}
	if x, ok := s.inv.byKey[key]; ok {
		dev := &s.inv.devs[x]
		for _, u := range dev.uses {
			v, _ := s.consumed.get(u.ctr)
			v = v1AddSat(v, int64(sign)*u.amount) // see v1ctr
			if v == 0 {
				s.consumed.del(u.ctr)
			} else {
				s.consumed.set(u.ctr, v)
			}
		}
		if dev.d.SeedInstance != "" {
			instance = dev.d.SeedInstance
		}
	}
	if instance == "" {
		return
	}
	pk := driver + "\x00" + pool
	ids, _ := s.seedUsed.get(pk)
	if sign > 0 {
		s.seedUsed.set(pk, append(slices.Clip(ids), instance))
		return
	}
	if i := slices.Index(ids, instance); i >= 0 {
		ids = slices.Delete(slices.Clone(ids), i, i+1)
		if len(ids) == 0 {
			s.seedUsed.del(pk)
		} else {
			s.seedUsed.set(pk, ids)
		}
	}
}

// seedLocked reports whether a seed leaf conflicts with an instance in
// use in its pool.
func (s *V1State) seedLocked(driver, pool, instance string) bool {
	ids, _ := s.seedUsed.get(driver + "\x00" + pool)
	for _, id := range ids {
		if SeedLeavesConflict(instance, id) {
			return true
		}
	}
	return false
}

// counterLeft returns what is left of a counter.
func (s *V1State) counterLeft(c int32) int64 {
	v, _ := s.consumed.get(c)
	return s.inv.ctrs[c].total - v
}
