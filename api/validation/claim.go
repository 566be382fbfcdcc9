package validation

import (
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var allocationModes = []resourcev1alpha2.AllocationMode{resourcev1alpha2.AllocationModeWaitForFirstConsumer, resourcev1alpha2.AllocationModeImmediate}

// ValidateResourceClass checks a class: a driver name, a complete
// parametersRef, a valid suitableNodes selector and controllerName.
func ValidateResourceClass(c *resourcev1alpha2.ResourceClass) field.ErrorList {
	errs := validateObjectMeta(&c.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateResourceClassFields(c)...)
}

func validateResourceClassFields(c *resourcev1alpha2.ResourceClass) field.ErrorList {
	errs := required(field.NewPath("driverName"), c.DriverName, dnsSubdomain)
	if ref := c.ParametersRef; ref != nil {
		p := field.NewPath("parametersRef")
		errs = append(errs, validateParametersRef(ref.APIGroup, ref.Kind, ref.Name, p)...)
		errs = append(errs, optional(p.Child("namespace"), ref.Namespace, dnsLabel)...)
	}
	errs = append(errs, validateNodeSelector(c.SuitableNodes, field.NewPath("suitableNodes"))...)
	return append(errs, optional(field.NewPath("controllerName"), c.ControllerName, dnsSubdomain)...)
}

// ValidateResourceClassUpdate checks a write to a class.
func ValidateResourceClassUpdate(newC, oldC *resourcev1alpha2.ResourceClass) field.ErrorList {
	errs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateResourceClassFields(newC)...)
}

// validateParametersRef checks a reference to a parameters object: kind
// and name are required, apiGroup is a DNS subdomain when set.
func validateParametersRef(apiGroup, kind, name string, path *field.Path) field.ErrorList {
	errs := optional(path.Child("apiGroup"), apiGroup, dnsSubdomain)
	errs = append(errs, required(path.Child("kind"), kind, nil)...)
	return append(errs, required(path.Child("name"), name, nil)...)
}

// ValidateResourceClaim checks a claim being created.
func ValidateResourceClaim(c *resourcev1alpha2.ResourceClaim) field.ErrorList {
	errs := validateObjectMeta(&c.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateClaimSpec(&c.Spec, field.NewPath("spec"))...)
}

func validateClaimSpec(spec *resourcev1alpha2.ResourceClaimSpec, path *field.Path) field.ErrorList {
	errs := required(path.Child("resourceClassName"), spec.ResourceClassName, dnsSubdomain)
	if ref := spec.ParametersRef; ref != nil {
		errs = append(errs, validateParametersRef(ref.APIGroup, ref.Kind, ref.Name, path.Child("parametersRef"))...)
	}
	if spec.AllocationMode != "" {
		errs = append(errs, supported(path.Child("allocationMode"), spec.AllocationMode, allocationModes...)...)
	}
	return errs
}

// ValidateResourceClaimUpdate checks a write to a claim: its spec is
// immutable.
func ValidateResourceClaimUpdate(newC, oldC *resourcev1alpha2.ResourceClaim) field.ErrorList {
	errs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, immutable(newC.Spec, oldC.Spec, field.NewPath("spec"))...)
}

// DefaultResourceClaim sets allocationMode to WaitForFirstConsumer.
func DefaultResourceClaim(c *resourcev1alpha2.ResourceClaim) {
	defaultClaimSpec(&c.Spec)
}

func defaultClaimSpec(spec *resourcev1alpha2.ResourceClaimSpec) {
	if spec.AllocationMode == "" {
		spec.AllocationMode = resourcev1alpha2.AllocationModeWaitForFirstConsumer
	}
}

// ValidateResourceClaimTemplate checks a template: the labels and
// annotations it gives claims, and the claim spec.
func ValidateResourceClaimTemplate(t *resourcev1alpha2.ResourceClaimTemplate) field.ErrorList {
	errs := validateObjectMeta(&t.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateTemplateSpec(&t.Spec)...)
}

func validateTemplateSpec(spec *resourcev1alpha2.ResourceClaimTemplateSpec) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateLabelsAndAnnotations(&spec.ObjectMeta, p.Child("metadata"))
	return append(errs, validateClaimSpec(&spec.Spec, p.Child("spec"))...)
}

// ValidateResourceClaimTemplateUpdate checks a write to a template: its
// spec is immutable.
func ValidateResourceClaimTemplateUpdate(newT, oldT *resourcev1alpha2.ResourceClaimTemplate) field.ErrorList {
	errs := validateObjectMetaUpdate(&newT.ObjectMeta, &oldT.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, immutable(newT.Spec, oldT.Spec, field.NewPath("spec"))...)
}

// DefaultResourceClaimTemplate defaults the claim spec of the template.
func DefaultResourceClaimTemplate(t *resourcev1alpha2.ResourceClaimTemplate) {
	defaultClaimSpec(&t.Spec.Spec)
}
