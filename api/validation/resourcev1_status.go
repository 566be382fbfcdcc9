package validation

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateResourceClaimV1StatusUpdate checks a write to a claim's status:
//
//   - reservedFor: at most 256 entries, unique by uid, each with resource,
//     name and uid; only while allocated; no new entries while the claim is
//     being deleted.
//   - allocation: "set once the claim has been allocated", so it may be set
//     and cleared but not changed; a claim that is reserved "must not get
//     deallocated", so it is cleared only once reservedFor is empty. A new
//     allocation refers to requests of the claim.
//   - devices: each entry names a device of the allocation ("The
//     combination of Driver, Pool, Device, and ShareID must match the
//     corresponding key in Status.Allocation.Devices."), with at most 8
//     conditions, at most 10 Ki of data and valid network data.
func ValidateResourceClaimV1StatusUpdate(newC, oldC *resourcev1.ResourceClaim) field.ErrorList {
	newC, oldC = defaultedClaimV1(newC), defaultedClaimV1(oldC)
	p := field.NewPath("status")
	errs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, resourcev1.Validate_ResourceClaimStatus(context.Background(), v1Op(true), p, &newC.Status, &oldC.Status)...)
	errs = append(errs, validateClaimStatusV1(&newC.Status, &oldC.Status, &newC.Spec, newC.DeletionTimestamp != nil, p)...)
	return append(errs, claimStatusFeatures(&newC.Status, p).refuse(claimStatusFeatures(&oldC.Status, p))...)
}

func validateClaimStatusV1(st, old *resourcev1.ResourceClaimStatus, spec *resourcev1.ResourceClaimSpec, deleting bool, path *field.Path) field.ErrorList {
	rp := func() *field.Path { return path.Child("reservedFor") }
	var errs field.ErrorList
	if len(st.ReservedFor) <= resourcev1.ResourceClaimReservedForMaxSize {
		// Paths are built only for an error: these checks run on every
		// binding.
		for i := range st.ReservedFor {
			r := &st.ReservedFor[i]
			if r.APIGroup != "" && len(utilvalidation.IsDNS1123Subdomain(r.APIGroup)) > 0 {
				errs = append(errs, dnsSubdomain(rp().Index(i).Child("apiGroup"), r.APIGroup)...)
			}
			for _, f := range [...]struct{ name, value string }{{"resource", r.Resource}, {"name", r.Name}, {"uid", string(r.UID)}} {
				if f.value == "" {
					errs = append(errs, field.Required(rp().Index(i).Child(f.name), ""))
				}
			}
		}
	}
	if len(st.ReservedFor) > 0 && st.Allocation == nil {
		if old.Allocation != nil {
			errs = append(errs, field.Forbidden(path.Child("allocation"), "may not be cleared while `reservedFor` is not empty: a claim that is reserved must not get deallocated"))
		} else {
			errs = append(errs, field.Forbidden(rp(), "may only be set while `allocation` is set"))
		}
	}
	if deleting {
		had := make(map[types.UID]bool, len(old.ReservedFor))
		for _, r := range old.ReservedFor {
			had[r.UID] = true
		}
		for i, r := range st.ReservedFor {
			if !had[r.UID] {
				errs = append(errs, field.Forbidden(rp().Index(i), "new consumers may not be added while the claim is being deleted"))
			}
		}
	}
	// A change of an allocation is refused by the generated validation
	// ("field cannot be modified once set"); an unchanged one is not
	// checked again.
	if st.Allocation != nil && old.Allocation == nil {
		errs = append(errs, validateAllocationV1(st.Allocation, gatherRequestNamesV1(&spec.Devices), path.Child("allocation"))...)
	}
	if len(st.Devices) == 0 {
		return errs
	}
	return append(errs, validateDeviceStatusesV1(st, path.Child("devices"))...)
}

// validateAllocationV1 checks a new allocation: results name requests of
// the claim and valid devices; config entries name requests; the node
// selector is valid. Result and config counts, driver, pool, shareID and
// source formats: generated validation.
func validateAllocationV1(a *resourcev1.AllocationResult, names requestNamesV1, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	dp := path.Child("devices")
	if len(a.Devices.Results) <= resourcev1.AllocationResultsMaxSize {
		for i := range a.Devices.Results {
			// A result's path is built only when something is there to
			// check or to report: these checks run on every binding.
			r := &a.Devices.Results[i]
			rp := func() *field.Path { return dp.Child("results").Index(i) }
			// "If it references a subrequest in the firstAvailable list on
			// a DeviceRequest, this field must include both the name of the
			// main request and the subrequest".
			if _, hasSubs := names[r.Request]; !names.has(r.Request) || (hasSubs && names[r.Request] != nil) {
				errs = append(errs, field.Invalid(rp().Child("request"), r.Request, "must be the name of an `exactly` request of the claim, or <request>/<subrequest> for a `firstAvailable` request"))
			}
			if r.Device == "" || len(utilvalidation.IsDNS1123Label(r.Device)) > 0 {
				errs = append(errs, required(rp().Child("device"), r.Device, dnsLabel)...)
			}
			if len(r.Tolerations) > 0 {
				errs = append(errs, validateTolerationsV1(r.Tolerations, rp().Child("tolerations"))...)
			}
			if len(r.BindingConditions) > 0 || len(r.BindingFailureConditions) > 0 {
				errs = append(errs, validateBindingConditionsV1(r.BindingConditions, r.BindingFailureConditions, rp())...)
			}
			if len(r.SkipNodeOperations) > 0 {
				errs = append(errs, validateSkipNodeOperationsV1(r.SkipNodeOperations, rp().Child("skipNodeOperations"))...)
			}
			if len(r.ConsumedCapacity) == 0 {
				continue
			}
			p := rp()
			for _, k := range sortedKeys(r.ConsumedCapacity) {
				cp := keyPath(p.Child("consumedCapacity"), string(k))
				errs = append(errs, validateQualifiedNameV1(string(k), cp)...)
				errs = append(errs, nonNegativeQuantity(cp, r.ConsumedCapacity[k])...)
			}
		}
	}
	// Class and claim configuration: "2*32".
	if len(a.Devices.Config) <= 2*resourcev1.DeviceConfigMaxSize {
		for i := range a.Devices.Config {
			c, p := &a.Devices.Config[i], dp.Child("config").Index(i)
			errs = append(errs, names.validateRefs(c.Requests, p.Child("requests"))...)
			errs = append(errs, validateDeviceConfigurationV1(&c.DeviceConfiguration, p, false)...)
		}
	}
	return append(errs, validateNodeSelectorV1(a.NodeSelector, path.Child("nodeSelector"), false)...)
}

// deviceKeyV1 identifies an allocated device (or a share of one).
type deviceKeyV1 struct {
	driver, pool, device, shareID string
	shared                        bool
}

func (k deviceKeyV1) String() string {
	s := k.driver + "/" + k.pool + "/" + k.device
	if k.shared {
		s += " (share " + k.shareID + ")"
	}
	return s
}

func validateDeviceStatusesV1(st *resourcev1.ResourceClaimStatus, path *field.Path) field.ErrorList {
	allocated := map[deviceKeyV1]bool{}
	if st.Allocation != nil {
		for _, r := range st.Allocation.Devices.Results {
			k := deviceKeyV1{driver: r.Driver, pool: r.Pool, device: r.Device}
			if r.ShareID != nil {
				k.shareID, k.shared = string(*r.ShareID), true
			}
			allocated[k] = true
		}
	}
	var errs field.ErrorList
	for i := range st.Devices {
		d, p := &st.Devices[i], path.Index(i)
		errs = append(errs, validateDriverNameV1(d.Driver, p.Child("driver"))...)
		errs = append(errs, validatePoolNameV1(d.Pool, p.Child("pool"))...)
		errs = append(errs, required(p.Child("device"), d.Device, dnsLabel)...)
		k := deviceKeyV1{driver: d.Driver, pool: d.Pool, device: d.Device}
		if d.ShareID != nil {
			k.shareID, k.shared = *d.ShareID, true
		}
		if !allocated[k] {
			errs = append(errs, field.Invalid(p, k.String(), "must be a device of `status.allocation.devices.results` (driver, pool, device and shareID)"))
		}
		// "Must not contain more than 8 entries."
		errs = append(errs, validateConditionsV1(d.Conditions, resourcev1.AllocatedDeviceStatusMaxConditions, p.Child("conditions"))...)
		// "The length of the raw data must be smaller or equal to 10 Ki."
		if d.Data != nil {
			errs = append(errs, validateJSONObjectV1(d.Data, p.Child("data"), resourcev1.AllocatedDeviceStatusDataMaxLength, false, false)...)
		}
		// Lengths and the number of IPs: generated validation. "The IPs
		// are in the CIDR notation".
		if nd := d.NetworkData; nd != nil && len(nd.IPs) <= resourcev1.NetworkDeviceDataMaxIPs {
			for j, ip := range nd.IPs {
				errs = append(errs, utilvalidation.IsValidInterfaceAddress(p.Child("networkData", "ips").Index(j), ip)...)
			}
		}
	}
	return errs
}
