package validation

import (
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateResourceClaimStatusUpdate checks a write to a claim's status:
// the allocation and the reservations must be consistent.
func ValidateResourceClaimStatusUpdate(newC, oldC *resourcev1alpha2.ResourceClaim) field.ErrorList {
	errs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	deleting := newC.DeletionTimestamp != nil
	return append(errs, validateClaimStatusUpdate(&newC.Status, &oldC.Status, deleting, field.NewPath("status"))...)
}

func validateClaimStatusUpdate(st, old *resourcev1alpha2.ResourceClaimStatus, deleting bool, path *field.Path) field.ErrorList {
	errs := optional(path.Child("driverName"), st.DriverName, dnsSubdomain)
	errs = append(errs, optional(path.Child("controllerName"), st.ControllerName, dnsSubdomain)...)
	errs = append(errs, validateReservedFor(st.ReservedFor, path.Child("reservedFor"))...)
	if st.Allocation != nil {
		errs = append(errs, validateAllocationResult(st.Allocation, path.Child("allocation"))...)
		if st.DriverName == "" {
			errs = append(errs, field.Required(path.Child("driverName"), "must be specified when `allocation` is set"))
		}
	}
	if old.Allocation != nil && st.Allocation != nil {
		if len(immutable(st.Allocation, old.Allocation, path)) > 0 {
			errs = append(errs, field.Forbidden(path.Child("allocation"), "may not be replaced by a different allocation; clear it first (deallocate)"))
		}
	}
	errs = append(errs, validateReservations(st, old, deleting, path)...)
	switch {
	case st.DeallocationRequested && st.Allocation == nil:
		errs = append(errs, field.Forbidden(path.Child("deallocationRequested"), "may only be set while `allocation` is set"))
	case st.DeallocationRequested && !old.DeallocationRequested && len(st.ReservedFor) > 0:
		errs = append(errs, field.Forbidden(path.Child("deallocationRequested"), "may not be set while `reservedFor` is not empty"))
	case !st.DeallocationRequested && old.DeallocationRequested && st.Allocation != nil:
		errs = append(errs, field.Forbidden(path.Child("deallocationRequested"), "may not be cleared while `allocation` is set; the driver clears both together"))
	}
	return errs
}

// validateReservations: reservedFor needs an allocation, a claim that is
// not shareable has at most one consumer, and no consumer may be added
// while the claim is being deallocated or deleted.
func validateReservations(st, old *resourcev1alpha2.ResourceClaimStatus, deleting bool, path *field.Path) field.ErrorList {
	if len(st.ReservedFor) == 0 {
		return nil
	}
	p := path.Child("reservedFor")
	if st.Allocation == nil {
		return field.ErrorList{field.Forbidden(p, "may only be set while `allocation` is set")}
	}
	var errs field.ErrorList
	if !st.Allocation.Shareable && len(st.ReservedFor) > 1 {
		errs = append(errs, field.Forbidden(p, "the claim is not shareable and may be reserved for at most one consumer"))
	}
	if deleting || st.DeallocationRequested {
		had := make(map[string]bool, len(old.ReservedFor))
		for _, r := range old.ReservedFor {
			had[string(r.UID)] = true
		}
		for i, r := range st.ReservedFor {
			if !had[string(r.UID)] {
				errs = append(errs, field.Forbidden(p.Index(i), "new consumers may not be added while `deallocationRequested` or `metadata.deletionTimestamp` is set"))
			}
		}
	}
	return errs
}

func validateReservedFor(refs []resourcev1alpha2.ResourceClaimConsumerReference, path *field.Path) field.ErrorList {
	errs := maxItems(path, len(refs), resourcev1alpha2.ResourceClaimReservedForMaxSize)
	var uids unique
	for i, r := range refs {
		p := path.Index(i)
		errs = append(errs, optional(p.Child("apiGroup"), r.APIGroup, dnsSubdomain)...)
		errs = append(errs, required(p.Child("resource"), r.Resource, nil)...)
		errs = append(errs, required(p.Child("name"), r.Name, nil)...)
		errs = append(errs, required(p.Child("uid"), string(r.UID), nil)...)
		if r.UID != "" {
			errs = append(errs, uids.check(string(r.UID), p.Child("uid"))...)
		}
	}
	return errs
}

// validateAllocationResult checks an allocation in a claim's status or in a
// Binding.
func validateAllocationResult(a *resourcev1alpha2.AllocationResult, path *field.Path) field.ErrorList {
	hp := path.Child("resourceHandles")
	errs := maxItems(hp, len(a.ResourceHandles), resourcev1alpha2.AllocationResultResourceHandlesMaxSize)
	for i := range a.ResourceHandles {
		errs = append(errs, validateResourceHandle(&a.ResourceHandles[i], hp.Index(i))...)
	}
	return append(errs, validateNodeSelector(a.AvailableOnNodes, path.Child("availableOnNodes"))...)
}

// validateResourceHandle: opaque data up to 16 KiB, or structured data,
// not both.
func validateResourceHandle(h *resourcev1alpha2.ResourceHandle, path *field.Path) field.ErrorList {
	errs := optional(path.Child("driverName"), h.DriverName, dnsSubdomain)
	errs = append(errs, maxLen(path.Child("data"), h.Data, resourcev1alpha2.ResourceHandleDataMaxSize)...)
	if h.Data != "" && h.StructuredData != nil {
		errs = append(errs, field.Invalid(path, omit, "may specify only one of: `data`, `structuredData`"))
	}
	sd := h.StructuredData
	if sd == nil {
		return errs
	}
	sp := path.Child("structuredData")
	errs = append(errs, optional(sp.Child("nodeName"), sd.NodeName, dnsSubdomain)...)
	var set []string
	if sd.Partitionable != nil {
		set = append(set, "partitionable")
	}
	if errs1 := oneOf(sp, []string{"partitionable"}, set); len(errs1) > 0 {
		return append(errs, errs1...)
	}
	ip := sp.Child("partitionable", "instances")
	if e := maxItems(ip, len(sd.Partitionable.Instances), resourcev1alpha2.AllocationResultInstancesMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	var ids unique
	for i, inst := range sd.Partitionable.Instances {
		if inst.ID == "" {
			errs = append(errs, field.Required(ip.Index(i).Child("id"), ""))
			continue
		}
		errs = append(errs, ids.check(inst.ID, ip.Index(i).Child("id"))...)
	}
	return errs
}
