package validation

import (
	"fmt"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// nameFunc checks a name, or with prefix a generateName prefix.
type nameFunc = apivalidation.ValidateNameFunc

var (
	nameIsDNSSubdomain nameFunc = apivalidation.NameIsDNSSubdomain
	nameIsDNSLabel     nameFunc = apivalidation.NameIsDNSLabel
)

var metaPath = field.NewPath("metadata")

// validateObjectMeta checks the metadata of an object being created. A
// missing name is fine when generateName is set: the server generates it.
func validateObjectMeta(m *metav1.ObjectMeta, nameFn nameFunc, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case m.Name != "":
		errs = append(errs, invalidAll(path.Child("name"), m.Name, nameFn(m.Name, false))...)
	case m.GenerateName == "":
		errs = append(errs, field.Required(path.Child("name"), "name or generateName is required"))
	}
	if m.GenerateName != "" {
		errs = append(errs, invalidAll(path.Child("generateName"), m.GenerateName, nameFn(m.GenerateName, true))...)
	}
	if m.Namespace != "" {
		errs = append(errs, invalidAll(path.Child("namespace"), m.Namespace, apivalidation.ValidateNamespaceName(m.Namespace, false))...)
	}
	errs = append(errs, nonNegative(path.Child("generation"), m.Generation)...)
	errs = append(errs, validateLabelsAndAnnotations(m, path)...)
	errs = append(errs, apivalidation.ValidateOwnerReferences(m.OwnerReferences, path.Child("ownerReferences"))...)
	errs = append(errs, apivalidation.ValidateFinalizers(m.Finalizers, path.Child("finalizers"))...)
	errs = append(errs, metav1validation.ValidateManagedFields(m.ManagedFields, path.Child("managedFields"))...)
	return errs
}

// validateLabelsAndAnnotations checks label keys and values, annotation keys
// and the 256 KiB total size of annotations.
func validateLabelsAndAnnotations(m *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(m.Labels, path.Child("labels"))
	return append(errs, apivalidation.ValidateAnnotations(m.Annotations, path.Child("annotations"))...)
}

// validateObjectMetaUpdate checks new metadata and what may not change.
// resourceVersion preconditions are the server's job.
func validateObjectMetaUpdate(newM, oldM *metav1.ObjectMeta, nameFn nameFunc, path *field.Path) field.ErrorList {
	errs := validateObjectMeta(newM, nameFn, path)
	return append(errs, validateObjectMetaChanges(newM, oldM, path)...)
}

// validateObjectMetaChanges checks only what an update may not change.
func validateObjectMetaChanges(newM, oldM *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := immutable(newM.Name, oldM.Name, path.Child("name"))
	errs = append(errs, immutable(newM.Namespace, oldM.Namespace, path.Child("namespace"))...)
	errs = append(errs, immutable(string(newM.UID), string(oldM.UID), path.Child("uid"))...)
	if !newM.CreationTimestamp.Equal(&oldM.CreationTimestamp) {
		errs = append(errs, field.Invalid(path.Child("creationTimestamp"), newM.CreationTimestamp.String(), msgImmutable))
	}
	if !newM.DeletionTimestamp.Equal(oldM.DeletionTimestamp) {
		errs = append(errs, field.Forbidden(path.Child("deletionTimestamp"), "is set by the server when the object is deleted and may not be changed"))
	}
	if newM.Generation < oldM.Generation {
		errs = append(errs, field.Invalid(path.Child("generation"), newM.Generation, "must not be decremented"))
	}
	if oldM.DeletionTimestamp != nil {
		errs = append(errs, noNewFinalizers(newM.Finalizers, oldM.Finalizers, path.Child("finalizers"))...)
	}
	return errs
}

func noNewFinalizers(newF, oldF []string, path *field.Path) field.ErrorList {
	old := make(map[string]bool, len(oldF))
	for _, f := range oldF {
		old[f] = true
	}
	var errs field.ErrorList
	for i, f := range newF {
		if !old[f] {
			errs = append(errs, field.Forbidden(path.Index(i), fmt.Sprintf("finalizer %q may not be added while the object is being deleted", f)))
		}
	}
	return errs
}
