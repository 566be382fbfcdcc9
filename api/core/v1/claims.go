package v1

// ResourceClaimNames lists the names of the ResourceClaims the pod uses:
// in spec order those named in spec.resourceClaims, or generated from a
// template and recorded in status.resourceClaimStatuses by the claim
// controller (a template's claim that is not recorded yet is left out),
// then the claim the scheduler made for its extended resources
// (status.extendedResourceClaimStatus), if any.
func (p *Pod) ResourceClaimNames() []string {
	out := p.specClaimNames()
	if name := p.ExtendedResourceClaimName(); name != "" {
		out = append(out, name)
	}
	return out
}

// ExtendedResourceClaimName is the name of the claim the scheduler made
// for the pod's extended resources served by DRA, or "".
func (p *Pod) ExtendedResourceClaimName() string {
	if st := p.Status.ExtendedResourceClaimStatus; st != nil {
		return st.ResourceClaimName
	}
	return ""
}

// UsesResourceClaims reports whether the pod uses any ResourceClaim: an
// entry of spec.resourceClaims, or a claim for its extended resources.
func (p *Pod) UsesResourceClaims() bool {
	return len(p.Spec.ResourceClaims) > 0 || p.ExtendedResourceClaimName() != ""
}

func (p *Pod) specClaimNames() []string {
	var out []string
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			out = append(out, *rc.ResourceClaimName)
			continue
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.Name == rc.Name && st.ResourceClaimName != nil {
				out = append(out, *st.ResourceClaimName)
				break
			}
		}
	}
	return out
}
