package allocator

import (
	"slices"

	"allot.dev/allot/pkg/allocator/engine"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// buildV1 writes the allocation results of the request's pending claims
// from the solution, for r: the request the solution was found for, or
// one with the same Signature (whose claims it names, and whose claims'
// configuration and share IDs it gives), on node ("": none; a Node
// always has a name).
func buildV1(sol *engine.Solution, r *V1Request, node string) []*resourcev1.AllocationResult {
	out := make([]*resourcev1.AllocationResult, len(r.claims))
	si := 0
	start := int32(0)
	for ci := range r.claims {
		if !r.Pending[ci] {
			continue
		}
		alloc := &resourcev1.AllocationResult{}
		claimStart, n := start, int32(0)
		if k := len(r.Reqs[ci]); k > 0 {
			n = sol.Reqs[si+k-1].End - start
		}
		alloc.Devices.Results = make([]resourcev1.DeviceRequestAllocationResult, 0, n)
		chosen := make([]*engine.Alt, len(r.Reqs[ci]))
		for qi := range r.Reqs[ci] {
			sr := sol.Reqs[si]
			a := &r.Reqs[ci][qi].Alts[sr.Alt]
			chosen[qi] = a
			for _, dv := range sol.Devs[start:sr.End] {
				pool, d := sol.Inv.At(dv.X)
				res := resourcev1.DeviceRequestAllocationResult{Request: a.Name, Driver: pool.Driver, Pool: pool.Name, Device: d.Name}
				if a.Admin {
					res.AdminAccess = ptr(true)
				}
				if len(a.Tolerations) > 0 {
					res.Tolerations = make([]resourcev1.DeviceToleration, len(a.Tolerations))
					for i := range a.Tolerations {
						a.Tolerations[i].DeepCopyInto(&res.Tolerations[i])
					}
				}
				if len(d.BindingConditions) > 0 {
					res.BindingConditions = slices.Clone(d.BindingConditions)
					res.BindingFailureConditions = slices.Clone(d.BindingFailureConditions)
				}
				if d.AllowMultipleAllocations {
					caps := sol.Inv.ShareCaps(dv.X)
					res.ShareID = ptr(v1ShareID(r.claims[ci].Claim, a.Name, shareKey(pool.Driver, pool.Name, d.Name)))
					res.ConsumedCapacity = make(map[resourcev1.QualifiedName]resource.Quantity, len(caps))
					for j := range caps {
						res.ConsumedCapacity[caps[j].Name] = dv.Consumed[j].DeepCopy()
					}
				}
				alloc.Devices.Results = append(alloc.Devices.Results, res)
			}
			start = sr.End
			si++
		}
		alloc.Devices.Config = v1Config(r.claims[ci].Claim, r.Reqs[ci], chosen)
		alloc.NodeSelector = v1NodeSelector(sol, sol.Devs[claimStart:start], node)
		out[ci] = alloc
	}
	return out
}

// v1Config is the configuration of an allocated claim, as upstream builds
// it: each class's config once, for the requests of that class (by the
// name in results), then the claim's config that applies to an allocated
// request or subrequest or to all; a list that names every request of
// the claim becomes empty (all).
func v1Config(claim *resourcev1.ResourceClaim, reqs []engine.Req, chosen []*engine.Alt) []resourcev1.DeviceAllocationConfiguration {
	var out []resourcev1.DeviceAllocationConfiguration
	type span struct{ start, end int }
	byClass := map[string]span{}
	for _, a := range chosen {
		if a.Class == nil {
			continue
		}
		if sp, ok := byClass[a.Class.Name]; ok {
			for i := sp.start; i < sp.end; i++ {
				out[i].Requests = append(out[i].Requests, a.Name)
			}
			continue
		}
		start := len(out)
		for _, cfg := range a.Class.Spec.Config {
			out = append(out, resourcev1.DeviceAllocationConfiguration{Source: resourcev1.AllocationConfigSourceClass,
				Requests: []string{a.Name}, DeviceConfiguration: *cfg.DeviceConfiguration.DeepCopy()})
		}
		byClass[a.Class.Name] = span{start, len(out)}
	}
	names := func(list []string, qi int) bool {
		return slices.Contains(list, reqs[qi].Name) || (reqs[qi].First && slices.Contains(list, chosen[qi].Name))
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

// v1NodeSelector is where a claim with these devices (inventory indexes, in
// result order) is available, as upstream computes it: the node of the
// first node-local device; else the requirements of the devices' one-term
// node selectors merged into one term; nil when every device is on all
// nodes. A selector of several terms (which validation forbids for
// slices) pins the claim to this node.
func v1NodeSelector(sol *engine.Solution, devs []engine.SolDev, node string) *k8scorev1.NodeSelector {
	byName := func(name string) *k8scorev1.NodeSelector {
		return &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
			MatchFields: []k8scorev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{name}}},
		}}}
	}
	var term k8scorev1.NodeSelectorTerm
	for _, dv := range devs {
		_, d := sol.Inv.At(dv.X)
		switch {
		case d.BindsToNode && node != "":
			// The device is attached to the node the allocation is made
			// for (KEP-5007): the allocation is not usable elsewhere.
			return byName(node)
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
				if node != "" {
					return byName(node)
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
