package allocator

import (
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
	engine.State
}

// NewState returns the state of inv with the v1 claims and the v1alpha2
// claims allocated (claims without an allocation are skipped).
func NewState(inv *engine.Inventory, v1Claims []*resourcev1.ResourceClaim, seedClaims []*resourceapi.ResourceClaim) *State {
	st := &State{State: engine.NewState(inv)}
	for _, c := range v1Claims {
		st.useV1Claim(c, 1)
	}
	for _, c := range seedClaims {
		st.useSeedClaim(c, 1)
	}
	st.Fold()
	return st
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
	out := &State{State: s.Edit()}
	for _, c := range removeV1 {
		out.useV1Claim(c, -1)
	}
	for _, c := range removeSeed {
		out.useSeedClaim(c, -1)
	}
	for _, c := range addV1 {
		out.useV1Claim(c, 1)
	}
	for _, c := range addSeed {
		out.useSeedClaim(c, 1)
	}
	return out
}

// WithSeedResults returns the state with v1alpha2 allocation results
// added that no claim holds yet, such as the results Allocate gives a
// pod's claims on a node before they are written.
func (s *State) WithSeedResults(results ...*resourceapi.AllocationResult) *State {
	out := &State{State: s.Edit()}
	for _, a := range results {
		out.useSeedResult(a, 1)
	}
	return out
}

// useV1Claim counts the devices of a v1 claim's allocation: its results,
// admin access left out (it does not use a device up).
func (s *State) useV1Claim(c *resourcev1.ResourceClaim, sign int32) {
	if c == nil || c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		s.Use(engine.DeviceUse{Driver: r.Driver, Pool: r.Pool, Device: r.Device, Shared: r.ShareID != nil, Consumed: r.ConsumedCapacity}, sign)
	}
}

// useSeedClaim counts the devices of a v1alpha2 claim's allocation.
func (s *State) useSeedClaim(c *resourceapi.ResourceClaim, sign int32) {
	if c != nil {
		s.useSeedResult(c.Status.Allocation, sign)
	}
}

// useSeedResult counts the devices of a seed allocation (nil: none): the
// instances of its structured handles, each a device of the projected
// pool of the handle's node.
func (s *State) useSeedResult(a *resourceapi.AllocationResult, sign int32) {
	if a == nil {
		return
	}
	for _, h := range a.ResourceHandles {
		sd := h.StructuredData
		if sd == nil || sd.Partitionable == nil {
			continue
		}
		for _, in := range sd.Partitionable.Instances {
			s.Use(engine.DeviceUse{Driver: h.DriverName, Pool: sd.NodeName, Device: SeedDeviceName(in.ID), Instance: in.ID}, sign)
		}
	}
}
