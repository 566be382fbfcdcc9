package engine

import (
	"slices"

	"allot.dev/allot/pkg/allocator/internal/layered"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// State is what of an Inventory is in use: the devices allocated to v1
// claims (by inventory index, a device of two slices with one driver,
// pool and name counted once; cluster-wide: a device that is not local
// to a node is one device for every node; a device the inventory does
// not know by driver, pool and name on the side), the shares of
// devices that allow multiple allocations with what they consume, the seed leaves
// allocated to v1alpha2 claims (their structured handles: pool = the
// handle's nodeName, device = SeedDeviceName(instance ID)), the seed
// instances those hold (so that partition locks hold across both APIs),
// and the shared counters the allocated devices consume.
//
// Admin-access results do not count as in use. A device allocated twice
// (inconsistent input) counts once for counters, and stays in use (and
// its partitions locked) until both allocations are removed.
//
// A State is immutable; WithAllocated and WithoutAllocated return new
// states sharing the rest (copy-on-write maps whose own part is folded
// into a new shared base once it outgrows √(2·base) keys).
// Safe for concurrent reads.
type State struct {
	inv      *Inventory
	used     *layered.Map[int32, int32]     // device (its canon index) → allocations
	consumed *layered.Map[int32, int64]     // counter → consumed, in its scale
	seedUsed *layered.Map[string, []string] // SchemeKey(driver, pool) → seed instance IDs in use
	shares   *layered.Map[int32, v1shares]  // device (canon) → its shares (results with a shareID)
	// unknown counts the devices the inventory does not know (an
	// allocation whose slice is gone), by v1Key: they stay in use, and a
	// new inventory that has them again counts them (a front end builds
	// a new state for a new inventory). Rare, so a string key is fine.
	unknown *layered.Map[string, unknownUse]
}

// unknownUse is how often a device the inventory does not know is
// allocated, and how many of those allocations are shares.
type unknownUse struct{ n, shares int32 }

// NewState returns the empty state of inv, to fill with Use and then
// Fold before anyone reads it. A State is used through a pointer; a front
// end may embed it.
func NewState(inv *Inventory) State {
	return State{inv: inv, used: layered.NewFilling[int32, int32](), consumed: layered.NewFilling[int32, int64](),
		seedUsed: layered.NewFilling[string, []string](), shares: layered.NewFilling[int32, v1shares](),
		unknown: layered.NewFilling[string, unknownUse]()}
}

// Fold ends the filling of a new state (its maps were written in place,
// layered.NewFilling), once, before anyone reads it or derives from it;
// on an edited state it folds the changes into flat maps, so that the
// states derived from it start from them.
func (s *State) Fold() {
	s.used.Fold()
	s.consumed.Fold()
	s.seedUsed.Fold()
	s.shares.Fold()
	s.unknown.Fold()
}

// Edit returns a version of s to change with Use before anyone reads it:
// it copies s's small deltas on its first write (layered's Derived),
// never touching s, which other goroutines may be reading or deriving
// from at the same time (a State is never written once published). A
// front end derives the state of its next listing from the last one this
// way instead of counting every claim again.
func (s *State) Edit() State {
	return State{inv: s.inv, used: s.used.Derived(), consumed: s.consumed.Derived(), seedUsed: s.seedUsed.Derived(),
		shares: s.shares.Derived(), unknown: s.unknown.Derived()}
}

// Use counts one device use in (sign 1) or out (sign -1, a use the state
// counted), on a state from NewState or Edit that nobody reads yet. A
// front end maps its claims' allocations to DeviceUses.
func (s *State) Use(u DeviceUse, sign int32) {
	x, known := s.inv.lookup(u.Driver, u.Pool, u.Device)
	switch {
	case !known:
		s.applyUnknown(u, sign)
	case u.Shared:
		s.applyShared(x, u.Consumed, sign)
	default:
		s.apply(x, u.Instance, sign)
	}
}

// SchemeKey is the key of a pool's entry in the scheme constraint's
// state (SchemeInUse).
func SchemeKey(driver, pool string) string { return driver + "\x00" + pool }

// SchemeInUse returns the seed instance IDs that allocations hold in the
// pool of projected seed devices of key (SchemeKey), one per allocation:
// the scheme constraint's state. The slice is never modified: a change
// stores a new one, so a caller may compare slices by identity to learn
// that nothing changed.
func (s *State) SchemeInUse(key string) []string {
	ids, _ := s.seedUsed.Get(key)
	return ids
}

// Inventory returns the inventory the state is about.
func (s *State) Inventory() *Inventory { return s.inv }

// InUse reports whether the device is allocated (admin access aside),
// whole or as shares (Shares tells how much of it the shares hold).
func (s *State) InUse(driver, pool, device string) bool {
	x, known := s.inv.lookup(driver, pool, device)
	if !known {
		u, _ := s.unknown.Get(v1Key(driver, pool, device))
		return u.n > 0
	}
	if d := &s.inv.devs[x]; d.seedOnly() {
		held, _ := s.seedHeld(s.inv.poolKey(d.pool), d.d.SeedInstance)
		return held
	}
	n, _ := s.used.Get(x)
	return n > 0
}

// DeviceUse is one device an allocation holds, as the one state counts
// it: driver, pool and device name, and the seed instance ID when the
// allocation names one.
type DeviceUse struct {
	Driver, Pool, Device, Instance string
	// shared: a share of a device with allowMultipleAllocations (the
	// result has a shareID), consuming what consumed says.
	Shared   bool
	Consumed map[resourcev1.QualifiedName]resource.Quantity
}

// apply counts one allocation of device x (a canon index: the one
// lookup returns) in or out. instance is the seed instance ID when the
// allocation names one (v1alpha2); the device's own is used when it has
// one. Counters change when the device goes from unused to used and
// back; the seed instances in use are kept per allocation, as a seed
// NodeState counts them, so that the seed view of a node (SeedNodeState)
// is the same whichever claims of a device allocated twice are counted
// first.
//
// A seed device that consumes no counters (every projected seed leaf) is
// counted only by its instance ID: in use when an allocation holds that
// instance (seedHeld), so a seed claim event writes one map.
func (s *State) apply(x int32, instance string, sign int32) {
	d := &s.inv.devs[x]
	if d.d.SeedInstance != "" {
		instance = d.d.SeedInstance
	}
	if instance != "" && d.seedOnly() {
		s.applySeedInstance(s.inv.poolKey(d.pool), instance, sign)
		return
	}
	n, _ := s.used.Get(x)
	switch {
	case sign > 0:
		s.used.Set(x, n+1)
	case n == 0:
		return // not counted
	case n > 1:
		s.used.Set(x, n-1)
	default:
		s.used.Del(x)
	}
	if (sign > 0 && n == 0) || (sign < 0 && n == 1) {
		for _, u := range d.uses {
			v, _ := s.consumed.Get(u.Counter)
			v = AddSat(v, int64(sign)*u.Amount) // see v1ctr
			if v == 0 {
				s.consumed.Del(u.Counter)
			} else {
				s.consumed.Set(u.Counter, v)
			}
		}
	}
	if instance != "" {
		s.applySeedInstance(s.inv.poolKey(d.pool), instance, sign)
	}
}

// applyUnknown counts one allocation of a device the inventory does not
// know in or out: a seed instance by its ID (it still locks what it
// conflicts with), any other device in the side map, a share as a share
// (without what it consumes: the inventory knows no capacity of it).
func (s *State) applyUnknown(u DeviceUse, sign int32) {
	if u.Instance != "" && !u.Shared {
		s.applySeedInstance(SchemeKey(u.Driver, u.Pool), u.Instance, sign)
		return
	}
	key := v1Key(u.Driver, u.Pool, u.Device)
	c, _ := s.unknown.Get(key)
	if u.Shared {
		if sign < 0 && c.shares == 0 {
			return // not counted
		}
		c.shares += sign
	}
	if sign > 0 || c.n > 0 {
		c.n += sign
	}
	if c == (unknownUse{}) {
		s.unknown.Del(key)
	} else {
		s.unknown.Set(key, c)
	}
}

// applySeedInstance counts one allocation of a seed instance of the pool
// of key (SchemeKey) in or out.
func (s *State) applySeedInstance(pk, instance string, sign int32) {
	ids, _ := s.seedUsed.Get(pk)
	if sign > 0 {
		s.seedUsed.Set(pk, append(slices.Clip(ids), instance))
		return
	}
	if i := slices.Index(ids, instance); i >= 0 {
		ids = slices.Delete(slices.Clone(ids), i, i+1)
		if len(ids) == 0 {
			s.seedUsed.Del(pk)
		} else {
			s.seedUsed.Set(pk, ids)
		}
	}
}

// seedOnly reports whether the device is counted by its seed instance
// alone: a projected seed leaf, which consumes no counters.
func (d *v1dev) seedOnly() bool { return d.d.SeedInstance != "" && len(d.uses) == 0 }

// seedHeld reports whether an allocation holds the seed instance itself
// in the pool of key (SchemeKey), and whether one conflicts with it
// (itself included).
func (s *State) seedHeld(pk, instance string) (held, locked bool) {
	ids, _ := s.seedUsed.Get(pk)
	for _, id := range ids {
		if id == instance {
			return true, true
		}
		if !locked && SeedLeavesConflict(instance, id) {
			locked = true
		}
	}
	return false, locked
}

// SchemeLocked reports whether a seed leaf conflicts with an instance in
// use in its pool.
func (s *State) SchemeLocked(driver, pool, instance string) bool {
	ids, _ := s.seedUsed.Get(SchemeKey(driver, pool))
	for _, id := range ids {
		if SeedLeavesConflict(instance, id) {
			return true
		}
	}
	return false
}

// CounterLeft returns what is left of a counter.
func (s *State) CounterLeft(c int32) int64 {
	v, _ := s.consumed.Get(c)
	return s.inv.ctrs[c].Total - v
}

// applyShared counts one share of device x (canon) in or out: an
// allocation like any other (the first consumes the device's shared
// counters, the last gives them back), plus its consumed capacity.
func (s *State) applyShared(x int32, consumed map[resourcev1.QualifiedName]resource.Quantity, sign int32) {
	if sign < 0 {
		if sh, _ := s.shares.Get(x); sh.n == 0 {
			return // not counted
		}
	}
	s.applyShare(x, consumed, sign)
	s.apply(x, "", sign)
}
