package validation

import (
	"reflect"
	"strings"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// ValidateResourceClaimTemplate checks a template: its spec.metadata holds
// only the labels and annotations it gives claims (seed 000, as in v1),
// and the claim spec.
func ValidateResourceClaimTemplate(t *resourcev1alpha2.ResourceClaimTemplate) field.ErrorList {
	errs := validateObjectMeta(&t.ObjectMeta, nameIsDNSSubdomain, metaPath)
	p := field.NewPath("spec")
	errs = append(errs, validateTemplateObjectMeta(&t.Spec.ObjectMeta, nil, p.Child("metadata"))...)
	return append(errs, validateClaimSpec(&t.Spec.Spec, p.Child("spec"))...)
}

// ValidateResourceClaimTemplateUpdate checks a write to a template: its
// spec is immutable. A template stored before spec.metadata was limited to
// labels and annotations stays writable: the other fields it holds may be
// kept as they are or dropped, never changed or added.
func ValidateResourceClaimTemplateUpdate(newT, oldT *resourcev1alpha2.ResourceClaimTemplate) field.ErrorList {
	errs := validateObjectMetaUpdate(&newT.ObjectMeta, &oldT.ObjectMeta, nameIsDNSSubdomain, metaPath)
	p := field.NewPath("spec")
	errs = append(errs, validateTemplateObjectMeta(&newT.Spec.ObjectMeta, &oldT.Spec.ObjectMeta, p.Child("metadata"))...)
	// The rest of spec.metadata was judged just above.
	newSpec, oldSpec := newT.Spec, oldT.Spec
	newSpec.ObjectMeta = metav1.ObjectMeta{Labels: newSpec.Labels, Annotations: newSpec.Annotations}
	oldSpec.ObjectMeta = metav1.ObjectMeta{Labels: oldSpec.Labels, Annotations: oldSpec.Annotations}
	return append(errs, immutable(newSpec, oldSpec, p)...)
}

// validateTemplateObjectMeta checks a claim template's spec.metadata, in
// either resource.k8s.io version: "ObjectMeta may contain labels and
// annotations that will be copied into the ResourceClaim when creating it.
// No other fields are allowed and will be rejected during validation."
// On an update, stored is the stored template's: a field it holds with the
// same value is left alone (stored before the rule).
func validateTemplateObjectMeta(m, stored *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := validateLabelsAndAnnotations(m, path)
	v := reflect.ValueOf(*m)
	var sv reflect.Value
	if stored != nil {
		sv = reflect.ValueOf(*stored)
	}
	for i := 0; i < v.NumField(); i++ {
		f, fv := v.Type().Field(i), v.Field(i)
		unset := fv.IsZero() || ((fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0)
		if f.Name == "Labels" || f.Name == "Annotations" || unset {
			continue
		}
		if stored != nil && apiequality.Semantic.DeepEqual(fv.Interface(), sv.Field(i).Interface()) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		errs = append(errs, field.Forbidden(path.Child(name), "only `labels` and `annotations` may be set in a claim template's metadata"))
	}
	return errs
}

// DefaultResourceClaimTemplate defaults the claim spec of the template.
func DefaultResourceClaimTemplate(t *resourcev1alpha2.ResourceClaimTemplate) {
	defaultClaimSpec(&t.Spec.Spec)
}
