package allocator

import (
	"context"
	"fmt"
	"slices"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
)

// Result is the outcome of allocating a pod's claims on one node.
type Result struct {
	Node string
	// Fits is true when every claim of the pod can be used on the node.
	Fits bool
	// Reasons explain a rejection; empty when Fits.
	Reasons []Reason
	// Allocations is parallel to Request.Claims: the allocation to store in
	// the claim's status, or nil for a claim that was already allocated.
	Allocations []*resourceapi.AllocationResult
	// CapacityBefore and CapacityAfter are how many instances of the node
	// could be allocated at the same time before and after this allocation
	// (all drivers; partition schemes chosen to maximize the count).
	CapacityBefore, CapacityAfter int
	// Score is 100 * CapacityAfter / CapacityBefore: how much of the node
	// stays usable. 100 for a node that had no capacity to lose.
	Score int
}

// Allocate decides whether the prepared claims fit on the node of st, and
// how. It does not change st; apply the result with NodeState.WithAllocated
// once the claims carry their allocations. It is deterministic for equal
// inputs. The only error is ErrDeadline (wrapped with the context's error),
// returned when ctx ends before the answer is known.
func Allocate(ctx context.Context, req *Request, st *NodeState) (*Result, error) {
	node := st.model.node
	res := &Result{Node: node, Allocations: make([]*resourceapi.AllocationResult, len(req.claims))}
	res.CapacityBefore = st.Capacity()
	res.CapacityAfter = res.CapacityBefore
	if len(req.reasons) > 0 {
		res.Reasons = slices.Clone(req.reasons)
		return finish(res), nil
	}
	res.Reasons = append(res.Reasons, req.nodeReasons(st)...)
	if len(res.Reasons) > 0 {
		return finish(res), nil
	}
	chosen := map[string][]int32{} // per driver: instance per item
	for _, d := range req.drivers {
		dm := st.model.drivers[d]
		if dm == nil {
			res.Reasons = append(res.Reasons, req.driverMissing(d)...)
			continue
		}
		masks := req.masks(d, dm)
		kinds := make([]int, len(req.items[d]))
		for i, it := range req.items[d] {
			kinds[i] = it.kind
		}
		s := newSolver(ctx, dm, st.stateOf(d), masks, kinds, len(req.kinds[d]))
		before := s.rootCap
		ok, f, err := s.solve()
		if err != nil {
			return nil, fmt.Errorf("allocate on node %s, driver %s: %w", node, d, err)
		}
		if !ok {
			res.Reasons = append(res.Reasons, req.explain(d, dm, st.stateOf(d), masks, f)...)
			continue
		}
		res.CapacityAfter -= int(before - s.rootCap)
		chosen[d] = s.assign
	}
	if len(res.Reasons) == 0 {
		res.Fits = true
		req.build(res, chosen, st.model)
	}
	return finish(res), nil
}

func finish(r *Result) *Result {
	if !r.Fits {
		r.Allocations = nil
		r.CapacityAfter = r.CapacityBefore
	}
	r.Score = 100
	if r.CapacityBefore > 0 {
		r.Score = 100 * r.CapacityAfter / r.CapacityBefore
	}
	return r
}

// nodeReasons checks the claims against the node itself: where allocated
// claims are available and which nodes their classes allow.
func (r *Request) nodeReasons(st *NodeState) []Reason {
	var out []Reason
	for i, c := range r.claims {
		if !r.pending[i] {
			alloc := c.Claim.Status.Allocation
			if alloc != nil && !MatchNodeSelector(alloc.AvailableOnNodes, st.node, st.model.node) {
				out = append(out, newReason(ReasonClaimAllocatedElsewhere, c.Key(), "", nil, "",
					"is allocated and not available on this node"))
			}
			continue
		}
		if sn := c.Class.SuitableNodes; sn != nil && !MatchNodeSelector(sn, st.node, st.model.node) {
			out = append(out, newReason(ReasonClassNodeMismatch, c.Key(), "", nil, "",
				fmt.Sprintf("class %s does not allow this node (suitableNodes)", c.Class.Name)))
		}
	}
	return out
}

func (r *Request) driverMissing(d string) []Reason {
	var out []Reason
	for _, g := range r.groupByClaim(d, nil) {
		out = append(out, newReason(ReasonDriverNotOnNode, g.claim, d, g.names, "",
			"the node has no resources of this driver"))
	}
	return out
}

// masks returns, per leaf of dm, the kinds of driver d the leaf matches.
// Unusable leaves match nothing.
func (r *Request) masks(d string, dm *driverModel) []uint64 {
	masks := make([]uint64, len(dm.leaves))
	for k, kd := range r.kinds[d] {
		outs := kd.outcomes(dm)
		for l, o := range outs {
			if o == outcomeTrue && dm.insts[dm.leaves[l]].ok {
				masks[l] |= 1 << k
			}
		}
	}
	return masks
}

// outcomes evaluates the kind against every leaf of dm: the first filter
// or the selector that is not true decides. Results are cached in dm.
func (k *kindOf) outcomes(dm *driverModel) []outcome {
	if v, ok := dm.matches.get(k.key); ok {
		return v
	}
	outs := make([]outcome, len(dm.leaves))
	for l, x := range dm.leaves {
		vars := dm.insts[x].vars
		o := outcomeTrue
		for _, f := range k.filters {
			if o = f.eval(vars); o != outcomeTrue {
				break
			}
		}
		if o == outcomeTrue {
			o = k.sel.eval(vars)
		}
		outs[l] = o
	}
	dm.matches.put(k.key, outs)
	return outs
}

// build fills in the allocation results of the pending claims.
func (r *Request) build(res *Result, chosen map[string][]int32, m *Model) {
	for ci, c := range r.claims {
		if !r.pending[ci] {
			continue
		}
		alloc := &resourceapi.AllocationResult{
			AvailableOnNodes: nodeNameSelector(m.node),
		}
		if c.ClaimParameters != nil {
			alloc.Shareable = c.ClaimParameters.Shareable
		}
		for _, d := range claimDrivers(c) {
			var ids []resourceapi.AllocatedResourceInstance
			for i, it := range r.items[d] {
				if it.claim == ci {
					ids = append(ids, resourceapi.AllocatedResourceInstance{ID: m.drivers[d].insts[chosen[d][i]].id})
				}
			}
			if ids == nil {
				ids = []resourceapi.AllocatedResourceInstance{}
			}
			alloc.ResourceHandles = append(alloc.ResourceHandles, resourceapi.ResourceHandle{
				DriverName: d,
				StructuredData: &resourceapi.StructuredResourceHandle{
					VendorClassParameters: vendorSnapshot(c.VendorClassParameters, classVendor(c.ClassParameters)),
					VendorClaimParameters: vendorSnapshot(c.VendorClaimParameters, claimVendor(c.ClaimParameters)),
					NodeName:              m.node,
					Partitionable:         &resourceapi.PartitionableAllocationResult{Instances: ids},
				},
			})
		}
		res.Allocations[ci] = alloc
	}
}

// claimDrivers lists the drivers of a claim's requests in first-use order.
func claimDrivers(c *Claim) []string {
	var out []string
	if c.ClaimParameters == nil {
		return nil
	}
	for _, req := range c.ClaimParameters.Requests {
		if !slices.Contains(out, req.DriverName) {
			out = append(out, req.DriverName)
		}
	}
	return out
}

func classVendor(p *resourceapi.ResourceClassParameters) *runtime.RawExtension {
	if p == nil {
		return nil
	}
	return p.VendorParameters
}

func claimVendor(p *resourceapi.ResourceClaimParameters) *runtime.RawExtension {
	if p == nil {
		return nil
	}
	return p.VendorParameters
}

func vendorSnapshot(primary, fallback *runtime.RawExtension) *runtime.RawExtension {
	src := primary
	if src == nil {
		src = fallback
	}
	if src == nil {
		return nil
	}
	return src.DeepCopy()
}

// nodeNameSelector is the availableOnNodes of a structured allocation.
func nodeNameSelector(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		}},
	}}}
}
