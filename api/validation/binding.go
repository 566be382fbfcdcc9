package validation

import (
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateBinding checks a binding of a pod (metadata.name) to a node, with
// the allocations of its claims and the fences that guard them.
func ValidateBinding(b *corev1.Binding) field.ErrorList {
	errs := validateObjectMeta(&b.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateBindingFields(b)...)
}

func validateBindingFields(b *corev1.Binding) field.ErrorList {
	tp := field.NewPath("target")
	var errs field.ErrorList
	if b.Target.Kind != "" {
		errs = append(errs, supported(tp.Child("kind"), b.Target.Kind, "Node")...)
	}
	errs = append(errs, required(tp.Child("name"), b.Target.Name, dnsSubdomain)...)
	cp := field.NewPath("resourceClaims")
	if e := maxItems(cp, len(b.ResourceClaims), corev1.PodResourceClaimsMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	if e := maxItems(field.NewPath("allocationFences"), len(b.AllocationFences), corev1.BindingAllocationFencesMaxSize); len(e) > 0 {
		return append(errs, e...)
	}
	var names unique
	for i := range b.ResourceClaims {
		errs = append(errs, validateBindingClaim(&b.ResourceClaims[i], cp.Index(i), &names)...)
	}
	fp := field.NewPath("allocationFences")
	var fences unique
	for i, f := range b.AllocationFences {
		p := fp.Index(i)
		errs = append(errs, required(p.Child("nodeName"), f.NodeName, dnsSubdomain)...)
		errs = append(errs, required(p.Child("driverName"), f.DriverName, dnsSubdomain)...)
		errs = append(errs, required(p.Child("revision"), f.Revision, nil)...)
		if dup := fences.check(f.NodeName+"\x00"+f.DriverName, p); len(dup) > 0 {
			errs = append(errs, field.Duplicate(p, f.NodeName+"/"+f.DriverName))
		}
	}
	return errs
}

func validateBindingClaim(c *corev1.BindingResourceClaim, path *field.Path, names *unique) field.ErrorList {
	errs := required(path.Child("name"), c.Name, dnsSubdomain)
	if c.Name != "" {
		errs = append(errs, names.check(c.Name, path.Child("name"))...)
	}
	errs = append(errs, optional(path.Child("driverName"), c.DriverName, dnsSubdomain)...)
	if c.Allocation == nil {
		return errs
	}
	if c.DriverName == "" {
		errs = append(errs, field.Required(path.Child("driverName"), "must be specified when `allocation` is set"))
	}
	ap := path.Child("allocation")
	if len(c.Allocation.Raw) == 0 {
		return append(errs, field.Required(ap, "must be a resource.k8s.io/v1alpha2 AllocationResult"))
	}
	var alloc resourcev1alpha2.AllocationResult
	if err := scheme.DecodeStrictInto(c.Allocation.Raw, &alloc); err != nil {
		return append(errs, field.Invalid(ap, omit, "must be a resource.k8s.io/v1alpha2 AllocationResult: "+err.Error()))
	}
	return append(errs, validateAllocationResult(&alloc, ap)...)
}

// ValidateBindingUpdate checks a write to a binding. A binding is acted on
// when it is created, so nothing but metadata may change.
func ValidateBindingUpdate(newB, oldB *corev1.Binding) field.ErrorList {
	errs := validateObjectMetaUpdate(&newB.ObjectMeta, &oldB.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateBindingFields(newB)...)
	errs = append(errs, immutable(newB.Target, oldB.Target, field.NewPath("target"))...)
	errs = append(errs, immutable(newB.ResourceClaims, oldB.ResourceClaims, field.NewPath("resourceClaims"))...)
	return append(errs, immutable(newB.AllocationFences, oldB.AllocationFences, field.NewPath("allocationFences"))...)
}
