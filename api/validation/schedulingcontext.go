package validation

import (
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidatePodSchedulingContext checks a scheduling context being created.
func ValidatePodSchedulingContext(sc *resourcev1alpha2.PodSchedulingContext) field.ErrorList {
	errs := validateObjectMeta(&sc.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateSchedulingSpec(&sc.Spec, field.NewPath("spec"))...)
	return append(errs, validateSchedulingStatus(&sc.Status, field.NewPath("status"))...)
}

func validateSchedulingSpec(spec *resourcev1alpha2.PodSchedulingContextSpec, path *field.Path) field.ErrorList {
	errs := optional(path.Child("selectedNode"), spec.SelectedNode, dnsSubdomain)
	return append(errs, validateNodeList(spec.PotentialNodes, path.Child("potentialNodes"))...)
}

func validateSchedulingStatus(st *resourcev1alpha2.PodSchedulingContextStatus, path *field.Path) field.ErrorList {
	if errs := maxItems(path.Child("resourceClaims"), len(st.ResourceClaims), resourcev1alpha2.PodSchedulingClaimsMaxSize); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	var names unique
	for i, c := range st.ResourceClaims {
		p := path.Child("resourceClaims").Index(i)
		errs = append(errs, required(p.Child("name"), c.Name, dnsLabel)...)
		if c.Name != "" {
			errs = append(errs, names.check(c.Name, p.Child("name"))...)
		}
		errs = append(errs, validateNodeList(c.UnsuitableNodes, p.Child("unsuitableNodes"))...)
	}
	return errs
}

// validateNodeList: at most 128 unique node names.
func validateNodeList(nodes []string, path *field.Path) field.ErrorList {
	errs := maxItems(path, len(nodes), resourcev1alpha2.PodSchedulingNodeListMaxSize)
	var seen unique
	for i, n := range nodes {
		errs = append(errs, required(path.Index(i), n, dnsSubdomain)...)
		errs = append(errs, seen.check(n, path.Index(i))...)
	}
	return errs
}

// ValidatePodSchedulingContextUpdate checks a write by the scheduler: the
// spec may change.
func ValidatePodSchedulingContextUpdate(newSC, oldSC *resourcev1alpha2.PodSchedulingContext) field.ErrorList {
	errs := validateObjectMetaUpdate(&newSC.ObjectMeta, &oldSC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateSchedulingSpec(&newSC.Spec, field.NewPath("spec"))...)
}

// ValidatePodSchedulingContextStatusUpdate checks a write by a driver.
func ValidatePodSchedulingContextStatusUpdate(newSC, oldSC *resourcev1alpha2.PodSchedulingContext) field.ErrorList {
	errs := validateObjectMetaUpdate(&newSC.ObjectMeta, &oldSC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateSchedulingStatus(&newSC.Status, field.NewPath("status"))...)
}
