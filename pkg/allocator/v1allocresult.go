package allocator

import (
	"slices"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// build writes the allocation results of the pending claims from the
// search's best solution.
func (p *v1prob) build(s *v1search) []*resourcev1.AllocationResult {
	r := p.r
	out := make([]*resourcev1.AllocationResult, len(r.claims))
	per := make([][]int32, len(p.sreqs))
	for _, pk := range s.best {
		per[pk.sreq] = append(per[pk.sreq], pk.c.l)
	}
	si := 0
	for ci := range r.claims {
		if !r.pending[ci] {
			continue
		}
		alloc := &resourcev1.AllocationResult{}
		n := 0
		for j := si; j < si+len(r.reqs[ci]); j++ {
			n += len(per[j])
		}
		alloc.Devices.Results = make([]resourcev1.DeviceRequestAllocationResult, 0, n)
		chosen := make([]*v1alt, len(r.reqs[ci]))
		devs := make([]int32, 0, n)
		for qi := range r.reqs[ci] {
			sa := &p.sreqs[si].alts[s.bestChosen[si]]
			a := sa.a
			chosen[qi] = a
			slices.Sort(per[si])
			for _, l := range per[si] {
				x := p.devs[l]
				d := &p.inv.devs[x]
				pool := &p.inv.pools[d.pool]
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
						res.ConsumedCapacity[d.caps[j].name] = sa.consumed[l][j].DeepCopy()
					}
				}
				alloc.Devices.Results = append(alloc.Devices.Results, res)
				devs = append(devs, x)
			}
			si++
		}
		alloc.Devices.Config = v1Config(r.claims[ci].Claim, r.reqs[ci], chosen)
		alloc.NodeSelector = p.nodeSelector(devs)
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
func (p *v1prob) nodeSelector(devs []int32) *k8scorev1.NodeSelector {
	byName := func(name string) *k8scorev1.NodeSelector {
		return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
			MatchFields: []k8scorev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{name}}},
		}}}
	}
	var term k8scorev1.NodeSelectorTerm
	for _, x := range devs {
		d := p.inv.devs[x].d
		switch {
		case d.BindsToNode && p.node != nil:
			// The device is attached to the node the allocation is made
			// for (KEP-5007): the allocation is not usable elsewhere.
			return byName(p.node.Name)
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
				if p.node != nil {
					return byName(p.node.Name)
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
