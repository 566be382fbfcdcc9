package dynamicresources

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"

	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
)

// The v1 halves of BoundClaims, Result and Claims, for `allot simulate`
// (internal/scheduler/simulate), which records a cycle's bindings of
// both versions in its snapshot and prints v1 claims as v1 claims.

// BoundClaimsV1 returns the pod's resource.k8s.io/v1 claims as Reserve
// left them (allocated on the node, reserved for the pod), or nil.
func BoundClaimsV1(state *framework.CycleState) []*resourcev1.ResourceClaim {
	s, ok := readState(state)
	if !ok || s.v1 == nil {
		return nil
	}
	s.v1.mu.Lock()
	defer s.v1.mu.Unlock()
	return slices.Clone(s.v1.chosen)
}

// ResultV1 returns the allocator's answer for the pod's v1 claims on
// node from the cycle, or nil when the pod has none or the node was not
// judged.
func ResultV1(state *framework.CycleState, node string) *allocator.V1Result {
	s, ok := readState(state)
	if !ok || s.v1 == nil {
		return nil
	}
	i := s.results.index(node)
	s.v1.mu.Lock()
	var res *allocator.V1Result
	if i >= 0 && i < len(s.v1.results) {
		res = s.v1.results[i]
	}
	s.v1.mu.Unlock()
	if res == nil {
		return nil
	}
	// The cycle judged the node with allocator.CheckV1: the answer's
	// allocations are built for the caller.
	out := *s.forNode(res, s.results.node(i))
	out.Allocations = out.Build()
	return &out
}

// V1Claims returns the claims stored as resource.k8s.io/v1, sorted by
// namespace and name.
func (o *Objects) V1Claims() []*resourcev1.ResourceClaim { return o.claims.V1Claims() }
