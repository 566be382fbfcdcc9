package allocator

import (
	"iter"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
)

// State is the one device-use state (engine.State) as the front ends change
// it: by the allocated claims of both APIs, v1 claims by their results,
// v1alpha2 claims by the instances of their structured handles (pool =
// the handle's nodeName, device = SeedDeviceName(instance ID)). It is
// immutable; every change returns a new State. Safe for concurrent reads.
type State struct {
	*engine.State
}

// NewState returns the state of inv with the v1 claims and the v1alpha2
// claims allocated (claims without an allocation are skipped).
func NewState(inv *engine.Inventory, v1Claims []*resourcev1.ResourceClaim, seedClaims []*resourceapi.ResourceClaim) *State {
	return &State{engine.NewState(inv, concatUses(v1ClaimUses(v1Claims), seedClaimUses(seedClaims)))}
}

// WithAllocated returns the state with the v1 claims' allocations added.
func (s *State) WithAllocated(claims ...*resourcev1.ResourceClaim) *State {
	return s.WithChanges(nil, claims, nil, nil)
}

// WithoutAllocated returns the state with the v1 claims' allocations
// removed.
func (s *State) WithoutAllocated(claims ...*resourcev1.ResourceClaim) *State {
	return s.WithChanges(claims, nil, nil, nil)
}

// WithSeedAllocated and WithoutSeedAllocated do the same for v1alpha2
// claims, whose seed leaves are devices of the projected pools.
func (s *State) WithSeedAllocated(claims ...*resourceapi.ResourceClaim) *State {
	return s.WithChanges(nil, nil, nil, claims)
}

func (s *State) WithoutSeedAllocated(claims ...*resourceapi.ResourceClaim) *State {
	return s.WithChanges(nil, nil, claims, nil)
}

// WithChanges returns the state after claim changes, in one step: the
// allocations of removeV1 and removeSeed (v1 and v1alpha2 claims the state
// counted) taken out, those of addV1 and addSeed put in. A scheduler
// derives the state of its next listing from the last one this way
// instead of counting every claim again.
func (s *State) WithChanges(removeV1, addV1 []*resourcev1.ResourceClaim, removeSeed, addSeed []*resourceapi.ResourceClaim) *State {
	return &State{s.With(concatUses(v1ClaimUses(removeV1), seedClaimUses(removeSeed)), concatUses(v1ClaimUses(addV1), seedClaimUses(addSeed)))}
}

// WithSeedResults returns the state with v1alpha2 allocation results
// added that no claim holds yet, such as the results Allocate gives a
// pod's claims on a node before they are written.
func (s *State) WithSeedResults(results ...*resourceapi.AllocationResult) *State {
	return &State{s.With(nil, func(yield func(engine.DeviceUse) bool) {
		for _, a := range results {
			for u := range seedAllocDevices(a) {
				if !yield(u) {
					return
				}
			}
		}
	})}
}

// concatUses is a's device uses, then b's.
func concatUses(a, b iter.Seq[engine.DeviceUse]) iter.Seq[engine.DeviceUse] {
	return func(yield func(engine.DeviceUse) bool) {
		for u := range a {
			if !yield(u) {
				return
			}
		}
		for u := range b {
			if !yield(u) {
				return
			}
		}
	}
}

// v1ClaimUses is the devices the v1 claims' allocations hold.
func v1ClaimUses(claims []*resourcev1.ResourceClaim) iter.Seq[engine.DeviceUse] {
	return func(yield func(engine.DeviceUse) bool) {
		for _, c := range claims {
			if c == nil || c.Status.Allocation == nil {
				continue
			}
			for u := range v1Devices(c.Status.Allocation) {
				if !yield(u) {
					return
				}
			}
		}
	}
}

// seedClaimUses is the devices the v1alpha2 claims' allocations hold.
func seedClaimUses(claims []*resourceapi.ResourceClaim) iter.Seq[engine.DeviceUse] {
	return func(yield func(engine.DeviceUse) bool) {
		for _, c := range claims {
			if c == nil {
				continue
			}
			for u := range seedAllocDevices(c.Status.Allocation) {
				if !yield(u) {
					return
				}
			}
		}
	}
}

// v1Devices is the v1 front end's devices of an allocation: its results,
// admin access left out (it does not use a device up).
func v1Devices(a *resourcev1.AllocationResult) iter.Seq[engine.DeviceUse] {
	return func(yield func(engine.DeviceUse) bool) {
		for _, r := range a.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			if !yield(engine.DeviceUse{Driver: r.Driver, Pool: r.Pool, Device: r.Device, Shared: r.ShareID != nil, Consumed: r.ConsumedCapacity}) {
				return
			}
		}
	}
}

// seedAllocDevices is the seed front end's devices of an allocation (nil:
// none): the instances of its structured handles, each a device of the
// projected pool of the handle's node.
func seedAllocDevices(a *resourceapi.AllocationResult) iter.Seq[engine.DeviceUse] {
	return func(yield func(engine.DeviceUse) bool) {
		if a == nil {
			return
		}
		for _, h := range a.ResourceHandles {
			sd := h.StructuredData
			if sd == nil || sd.Partitionable == nil {
				continue
			}
			for _, in := range sd.Partitionable.Instances {
				if !yield(engine.DeviceUse{Driver: h.DriverName, Pool: sd.NodeName, Device: SeedDeviceName(in.ID), Instance: in.ID}) {
					return
				}
			}
		}
	}
}
