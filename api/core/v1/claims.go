package v1

// ResourceClaimNames lists, in spec order, the names of the ResourceClaims
// the pod uses: named in spec.resourceClaims, or generated from a template
// and recorded in status.resourceClaimStatuses by the claim controller. A
// template's claim that is not recorded yet is left out.
func (p *Pod) ResourceClaimNames() []string {
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
