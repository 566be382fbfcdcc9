package validation

import (
	"fmt"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// standardContainerResources are the names without a domain that a
// container may request; hugepages-<size> are accepted too.
var standardContainerResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, "ephemeral-storage": true,
}

// isNativeResource: no domain, or in the kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	s := string(name)
	return !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/")
}

// isExtendedResource: a resource with a domain outside kubernetes.io, such
// as example.com/gpu, or a DeviceClass's implicit
// deviceclass.resource.kubernetes.io/CLASS. It is counted in whole units
// and cannot be overcommitted.
func isExtendedResource(name corev1.ResourceName) bool {
	return (!isNativeResource(name) && !strings.HasPrefix(string(name), "requests.")) || isDeviceClassResource(name)
}

// isDeviceClassResource: deviceclass.resource.kubernetes.io/CLASS, which
// DRA serves with a device of class CLASS.
func isDeviceClassResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), DeviceClassResourcePrefix) && len(name) > len(DeviceClassResourcePrefix)
}

// DeviceClassResourcePrefix names the extended resource every DeviceClass
// offers implicitly: deviceclass.resource.kubernetes.io/CLASS.
const DeviceClassResourcePrefix = "deviceclass.resource.kubernetes.io/"

// IsDRAExtendedResourceName reports whether name is a resource DRA may
// serve for a container: an extended resource (a DeviceClass's
// extendedResourceName) or a DeviceClass's implicit
// deviceclass.resource.kubernetes.io/CLASS.
func IsDRAExtendedResourceName(name corev1.ResourceName) bool {
	return isExtendedResource(name) || strings.HasPrefix(string(name), DeviceClassResourcePrefix)
}

func isStandardContainerResource(name corev1.ResourceName) bool {
	return standardContainerResources[name] || strings.HasPrefix(string(name), "hugepages-")
}

// validateResources checks a container's requests and limits as Kubernetes
// does: valid names, non-negative quantities, requests no larger than
// limits, and for extended resources whole numbers with requests equal to
// limits (limits required when requests are set).
func validateResources(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	for _, name := range sortedKeys(r.Limits) {
		q := r.Limits[name]
		errs = append(errs, validateContainerResource(name, limPath.Key(string(name)))...)
		errs = append(errs, validateAmount(name, q, limPath.Key(string(name)))...)
	}
	for _, name := range sortedKeys(r.Requests) {
		q := r.Requests[name]
		p := reqPath.Key(string(name))
		errs = append(errs, validateContainerResource(name, p)...)
		errs = append(errs, validateAmount(name, q, p)...)
		limit, hasLimit := r.Limits[name]
		switch {
		case isExtendedResource(name) && !hasLimit:
			errs = append(errs, field.Required(limPath.Key(string(name)), "a limit must be set for an extended resource that has a request; it cannot be overcommitted"))
		case isExtendedResource(name) && q.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case hasLimit && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateContainerResource(name corev1.ResourceName, path *field.Path) field.ErrorList {
	s := string(name)
	if msgs := content.IsLabelKey(s); len(msgs) > 0 {
		return invalidAll(path, s, msgs)
	}
	if isNativeResource(name) && !isStandardContainerResource(name) && !isDeviceClassResource(name) {
		return field.ErrorList{field.Invalid(path, s, "must be cpu, memory, ephemeral-storage, hugepages-<size>, "+DeviceClassResourcePrefix+"<class>, or an extended resource with a domain outside kubernetes.io (example.com/gpu)")}
	}
	return nil
}

// validateAmount checks a quantity of the named resource, in a
// container's requests or limits or a node's capacity: not negative,
// within allot's bounds, whole for an extended resource.
func validateAmount(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	if errs := nonNegativeQuantity(path, q); len(errs) > 0 {
		return errs
	}
	if errs := quantityInBounds(path, name, q); len(errs) > 0 {
		return errs
	}
	if isExtendedResource(name) && !isWholeNumber(q) {
		return field.ErrorList{field.Invalid(path, q.String(), "must be a whole number for an extended resource")}
	}
	return nil
}

// validateResourceList checks the names and quantities of a node's capacity
// or allocatable.
func validateResourceList(list corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(list) {
		p := path.Key(string(name))
		errs = append(errs, qualifiedName(p, string(name))...)
		errs = append(errs, validateAmount(name, list[name], p)...)
	}
	return errs
}
