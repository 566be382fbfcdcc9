package allocator

import (
	"slices"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// v1Solution is a search's best solution as far as the allocation
// results need it, kept past the search (whose arena is reused): a
// V1Result of CheckV1 builds its allocations from it only when they are
// read (V1Result.Build), for its own request or, taken For another
// request of the same Signature, for that one's claims.
type v1Solution struct {
	inv    *V1Inventory
	node   string // the node's name, when onNode
	onNode bool
	reqs   []v1SolReq // per pending request: claims in order, requests in order
	devs   []v1SolDev // the devices taken, by request, each request's in result order
}

// v1SolReq is what one pending request took: the alternative (index in
// the request's alts: the exactly request, or the subrequest) and the
// end of its devices in v1Solution.devs.
type v1SolReq struct {
	alt, end int32
}

// v1SolDev is one device taken: its inventory index and, for a share of
// a shared device, what the share consumes (the search's own slice,
// never modified; build copies it).
type v1SolDev struct {
	x        int32
	consumed []resource.Quantity
}

// solution keeps the search's best solution (see v1Solution).
func (p *v1prob) solution(s *v1search) *v1Solution {
	sol := &v1Solution{inv: p.inv, node: p.node, onNode: p.onNode, reqs: make([]v1SolReq, len(p.sreqs)), devs: make([]v1SolDev, len(s.best))}
	// Count each request's devices, place them from its start (end is the
	// cursor while filling), then order each request's devices as the
	// inventory does (local devices are in inventory order).
	for _, pk := range s.best {
		sol.reqs[pk.sreq].end++
	}
	start := int32(0)
	for i := range sol.reqs {
		start, sol.reqs[i].end = start+sol.reqs[i].end, start
	}
	for _, pk := range s.best {
		sr := &p.sreqs[pk.sreq]
		sa := &sr.alts[s.bestChosen[pk.sreq]]
		l := pk.c.l
		dv := v1SolDev{x: p.devs[l]}
		if p.inv.devs[dv.x].multi {
			dv.consumed = sa.consumed[l]
		}
		sol.devs[sol.reqs[pk.sreq].end] = dv
		sol.reqs[pk.sreq].end++
	}
	begin := int32(0)
	for i := range sol.reqs {
		// The search's alternatives of a request are the request's, in
		// order.
		sol.reqs[i].alt = int32(s.bestChosen[i])
		end := sol.reqs[i].end
		slices.SortFunc(sol.devs[begin:end], func(x, y v1SolDev) int { return int(x.x - y.x) })
		begin = end
	}
	return sol
}

// build writes the allocation results of the request's pending claims
// from the solution, for r: the request the solution was found for, or
// one with the same Signature (whose claims it names, and whose claims'
// configuration and share IDs it gives).
func (sol *v1Solution) build(r *V1Request) []*resourcev1.AllocationResult {
	out := make([]*resourcev1.AllocationResult, len(r.claims))
	si := 0
	start := int32(0)
	for ci := range r.claims {
		if !r.pending[ci] {
			continue
		}
		alloc := &resourcev1.AllocationResult{}
		claimStart, n := start, int32(0)
		if k := len(r.reqs[ci]); k > 0 {
			n = sol.reqs[si+k-1].end - start
		}
		alloc.Devices.Results = make([]resourcev1.DeviceRequestAllocationResult, 0, n)
		chosen := make([]*v1alt, len(r.reqs[ci]))
		for qi := range r.reqs[ci] {
			sr := sol.reqs[si]
			a := &r.reqs[ci][qi].alts[sr.alt]
			chosen[qi] = a
			for _, dv := range sol.devs[start:sr.end] {
				d := &sol.inv.devs[dv.x]
				pool := &sol.inv.pools[d.pool]
				res := resourcev1.DeviceRequestAllocationResult{Request: a.name, Driver: pool.Driver, Pool: pool.Name, Device: d.d.Name}
				if a.admin {
					res.AdminAccess = ptr(true)
				}
				if len(a.tolerations) > 0 {
					res.Tolerations = make([]resourcev1.DeviceToleration, len(a.tolerations))
					for i := range a.tolerations {
						a.tolerations[i].DeepCopyInto(&res.Tolerations[i])
					}
				}
				if len(d.d.BindingConditions) > 0 {
					res.BindingConditions = slices.Clone(d.d.BindingConditions)
					res.BindingFailureConditions = slices.Clone(d.d.BindingFailureConditions)
				}
				if d.multi {
					res.ShareID = ptr(v1ShareID(r.claims[ci].Claim, a.name, d.key))
					res.ConsumedCapacity = make(map[resourcev1.QualifiedName]resource.Quantity, len(d.caps))
					for j := range d.caps {
						res.ConsumedCapacity[d.caps[j].name] = dv.consumed[j].DeepCopy()
					}
				}
				alloc.Devices.Results = append(alloc.Devices.Results, res)
			}
			start = sr.end
			si++
		}
		alloc.Devices.Config = v1Config(r.claims[ci].Claim, r.reqs[ci], chosen)
		alloc.NodeSelector = sol.nodeSelector(sol.devs[claimStart:start])
		out[ci] = alloc
	}
	return out
}

// v1Config is the configuration of an allocated claim, as upstream builds
// it: each class's config once, for the requests of that class (by the
// name in results), then the claim's config that applies to an allocated
// request or subrequest or to all; a list that names every request of
// the claim becomes empty (all).
func v1Config(claim *resourcev1.ResourceClaim, reqs []v1req, chosen []*v1alt) []resourcev1.DeviceAllocationConfiguration {
	var out []resourcev1.DeviceAllocationConfiguration
	type span struct{ start, end int }
	byClass := map[string]span{}
	for _, a := range chosen {
		if a.class == nil {
			continue
		}
		if sp, ok := byClass[a.class.Name]; ok {
			for i := sp.start; i < sp.end; i++ {
				out[i].Requests = append(out[i].Requests, a.name)
			}
			continue
		}
		start := len(out)
		for _, cfg := range a.class.Spec.Config {
			out = append(out, resourcev1.DeviceAllocationConfiguration{Source: resourcev1.AllocationConfigSourceClass,
				Requests: []string{a.name}, DeviceConfiguration: *cfg.DeviceConfiguration.DeepCopy()})
		}
		byClass[a.class.Name] = span{start, len(out)}
	}
	names := func(list []string, qi int) bool {
		return slices.Contains(list, reqs[qi].name) || (reqs[qi].first && slices.Contains(list, chosen[qi].name))
	}
	for _, cfg := range claim.Spec.Devices.Config {
		applies := len(cfg.Requests) == 0
		for qi := range reqs {
			applies = applies || names(cfg.Requests, qi)
		}
		if applies {
			out = append(out, resourcev1.DeviceAllocationConfiguration{Source: resourcev1.AllocationConfigSourceClaim,
				Requests: slices.Clone(cfg.Requests), DeviceConfiguration: *cfg.DeviceConfiguration.DeepCopy()})
		}
	}
	for i := range out {
		if len(out[i].Requests) == 0 {
			continue
		}
		all := true
		for qi := range reqs {
			all = all && names(out[i].Requests, qi)
		}
		if all {
			out[i].Requests = nil
		}
	}
	return out
}

// nodeSelector is where a claim with these devices (inventory indexes, in
// result order) is available, as upstream computes it: the node of the
// first node-local device; else the requirements of the devices' one-term
// node selectors merged into one term; nil when every device is on all
// nodes. A selector of several terms (which validation forbids for
// slices) pins the claim to this node.
func (sol *v1Solution) nodeSelector(devs []v1SolDev) *k8scorev1.NodeSelector {
	byName := func(name string) *k8scorev1.NodeSelector {
		return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
			MatchFields: []k8scorev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{name}}},
		}}}
	}
	var term k8scorev1.NodeSelectorTerm
	for _, dv := range devs {
		d := sol.inv.devs[dv.x].d
		switch {
		case d.BindsToNode && sol.onNode:
			// The device is attached to the node the allocation is made
			// for (KEP-5007): the allocation is not usable elsewhere.
			return byName(sol.node)
		case d.NodeName != "":
			return byName(d.NodeName)
		case d.NodeSelector != nil:
			switch len(d.NodeSelector.NodeSelectorTerms) {
			case 0:
			case 1:
				t := &d.NodeSelector.NodeSelectorTerms[0]
				term.MatchFields = v1AddRequirements(term.MatchFields, t.MatchFields)
				term.MatchExpressions = v1AddRequirements(term.MatchExpressions, t.MatchExpressions)
			default:
				if sol.onNode {
					return byName(sol.node)
				}
			}
		}
	}
	if len(term.MatchFields) == 0 && len(term.MatchExpressions) == 0 {
		return nil
	}
	return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{term}}
}

// v1AddRequirements appends the requirements of from that to lacks (same
// key, operator and set of values).
func v1AddRequirements(to, from []k8scorev1.NodeSelectorRequirement) []k8scorev1.NodeSelectorRequirement {
	for _, r := range from {
		if !slices.ContainsFunc(to, func(have k8scorev1.NodeSelectorRequirement) bool {
			return have.Key == r.Key && have.Operator == r.Operator && sameSet(have.Values, r.Values)
		}) {
			to = append(to, *r.DeepCopy())
		}
	}
	return to
}

func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
