package dra

import (
	resourcev1 "k8s.io/api/resource/v1"

	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// The versions a claim is stored as (claimRecord.Version).
var (
	versionV1alpha2 = resourcev1alpha2.SchemeGroupVersion.String()
	versionV1       = resourcev1.SchemeGroupVersion.String()
)

// v1Form returns the v1alpha2 form in which the Manager checks, prepares
// and records a v1 claim: resourceconv.ClaimToV1alpha2 (metadata,
// reservedFor, availableOnNodes from the allocation's nodeSelector, one
// resource handle per driver of the results), each handle's structured
// data rebuilt for this node by resourceconv.DriverHandle (the driver's
// instances in this node's pool, its opaque configuration as vendor
// parameters, its devices in other pools as the handle's data). A driver then gets what
// it would get for an equivalent v1alpha2 claim allocated by allot's
// scheduler. problem (a phrase to follow the claim's name) is set when
// the allocation cannot be expressed so. The handles of drivers for which
// kubelet reports true (they speak the kubelet's DRA API and read the
// claim themselves) are left without data.
func v1Form(claim *resourcev1.ResourceClaim, node string, kubelet func(driver string) bool) (form *resourcev1alpha2.ResourceClaim, problem string) {
	form = resourceconv.ClaimToV1alpha2(claim)
	a := claim.Status.Allocation
	if a == nil {
		return form, ""
	}
	for i := range form.Status.Allocation.ResourceHandles {
		rh := &form.Status.Allocation.ResourceHandles[i]
		if kubelet != nil && kubelet(rh.DriverName) {
			rh.StructuredData, rh.Data = nil, ""
			continue
		}
		sd, data, err := resourceconv.DriverHandle(a, rh.DriverName, node)
		if err != nil {
			return nil, err.Error()
		}
		rh.StructuredData, rh.Data = sd, data
	}
	return form, ""
}
