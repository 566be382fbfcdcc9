package validation

import (
	"fmt"
	"regexp"
	"strings"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	// builtinGroups are served by allot itself; a CRD may not shadow them.
	builtinGroups = map[string]bool{"": true, resourcev1alpha2.GroupName: true, apiextv1.GroupName: true}
	kindRegexp    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
	crdScopes     = []apiextv1.ResourceScope{apiextv1.NamespaceScoped, apiextv1.ClusterScoped}
	columnTypes   = []string{"integer", "number", "string", "boolean", "date"}
)

// ValidateCustomResourceDefinition checks a CRD: its name is
// <plural>.<group>, the group is a domain of its own, the names are
// well-formed, and every served version has a structural schema with an
// object at the root.
func ValidateCustomResourceDefinition(crd *apiextv1.CustomResourceDefinition) field.ErrorList {
	errs := validateObjectMeta(&crd.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateCRDFields(crd)...)
}

func validateCRDFields(crd *apiextv1.CustomResourceDefinition) field.ErrorList {
	spec, path := &crd.Spec, field.NewPath("spec")
	var errs field.ErrorList
	if want := spec.Names.Plural + "." + spec.Group; crd.Name != "" && crd.Name != want {
		errs = append(errs, field.Invalid(metaPath.Child("name"), crd.Name, fmt.Sprintf("must be spec.names.plural+\".\"+spec.group (%q)", want)))
	}
	errs = append(errs, validateCRDGroup(spec.Group, path.Child("group"))...)
	errs = append(errs, validateCRDNames(&spec.Names, path.Child("names"))...)
	if spec.Scope == "" {
		errs = append(errs, field.Required(path.Child("scope"), "must be Namespaced or Cluster"))
	} else {
		errs = append(errs, supported(path.Child("scope"), spec.Scope, crdScopes...)...)
	}
	errs = append(errs, validateCRDVersions(spec.Versions, path.Child("versions"))...)
	if spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(path.Child("preserveUnknownFields"), true, "must be false; use x-kubernetes-preserve-unknown-fields in the schema instead"))
	}
	return errs
}

func validateCRDGroup(group string, path *field.Path) field.ErrorList {
	if builtinGroups[group] {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf("group %q is served by allot's built-in kinds and may not be shadowed", group))}
	}
	errs := dnsSubdomain(path, group)
	if !strings.Contains(group, ".") {
		errs = append(errs, field.Invalid(path, group, "must be a domain with at least one dot, such as example.com"))
	}
	return errs
}

func validateCRDNames(n *apiextv1.CustomResourceDefinitionNames, path *field.Path) field.ErrorList {
	errs := required(path.Child("plural"), n.Plural, dnsLabel)
	errs = append(errs, optional(path.Child("singular"), n.Singular, dnsLabel)...)
	errs = append(errs, required(path.Child("kind"), n.Kind, camelCase)...)
	errs = append(errs, optional(path.Child("listKind"), n.ListKind, camelCase)...)
	if n.ListKind != "" && n.ListKind == n.Kind {
		errs = append(errs, field.Invalid(path.Child("listKind"), n.ListKind, "must differ from kind"))
	}
	var short unique
	for i, s := range n.ShortNames {
		errs = append(errs, required(path.Child("shortNames").Index(i), s, dnsLabel)...)
		errs = append(errs, short.check(s, path.Child("shortNames").Index(i))...)
	}
	for i, c := range n.Categories {
		errs = append(errs, required(path.Child("categories").Index(i), c, dnsLabel)...)
	}
	return errs
}

func camelCase(path *field.Path, value string) field.ErrorList {
	if !kindRegexp.MatchString(value) {
		return field.ErrorList{field.Invalid(path, value, "must be CamelCase: an upper-case letter followed by letters and digits, at most 63 characters (such as CardParameters)")}
	}
	return nil
}

func validateCRDVersions(versions []apiextv1.CustomResourceDefinitionVersion, path *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(path, "must have at least one version")}
	}
	var errs field.ErrorList
	var names unique
	storage := 0
	for i := range versions {
		v, p := &versions[i], path.Index(i)
		errs = append(errs, required(p.Child("name"), v.Name, dnsLabel)...)
		errs = append(errs, names.check(v.Name, p.Child("name"))...)
		if v.Storage {
			storage++
		}
		sp := p.Child("schema", "openAPIV3Schema")
		switch {
		case v.Schema != nil && v.Schema.OpenAPIV3Schema != nil:
			errs = append(errs, validateRootSchema(v.Schema.OpenAPIV3Schema, sp)...)
		case v.Served:
			errs = append(errs, field.Required(sp, "a served version needs a schema"))
		}
		for j, c := range v.AdditionalPrinterColumns {
			cp := p.Child("additionalPrinterColumns").Index(j)
			errs = append(errs, required(cp.Child("name"), c.Name, nil)...)
			errs = append(errs, required(cp.Child("jsonPath"), c.JSONPath, nil)...)
			errs = append(errs, supported(cp.Child("type"), c.Type, columnTypes...)...)
		}
	}
	if storage != 1 {
		errs = append(errs, field.Invalid(path, storage, "must have exactly one version marked as storage version"))
	}
	return errs
}

// ValidateCustomResourceDefinitionUpdate checks a write to a CRD: group,
// plural and scope may not change.
func ValidateCustomResourceDefinitionUpdate(newCRD, oldCRD *apiextv1.CustomResourceDefinition) field.ErrorList {
	path := field.NewPath("spec")
	errs := validateObjectMetaUpdate(&newCRD.ObjectMeta, &oldCRD.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateCRDFields(newCRD)...)
	errs = append(errs, immutable(newCRD.Spec.Group, oldCRD.Spec.Group, path.Child("group"))...)
	errs = append(errs, immutable(newCRD.Spec.Names.Plural, oldCRD.Spec.Names.Plural, path.Child("names", "plural"))...)
	return append(errs, immutable(string(newCRD.Spec.Scope), string(oldCRD.Spec.Scope), path.Child("scope"))...)
}

// ValidateCustomResourceDefinitionStatusUpdate checks a write to a CRD's
// status.
func ValidateCustomResourceDefinitionStatusUpdate(newCRD, oldCRD *apiextv1.CustomResourceDefinition) field.ErrorList {
	path := field.NewPath("status")
	errs := validateObjectMetaUpdate(&newCRD.ObjectMeta, &oldCRD.ObjectMeta, nameIsDNSSubdomain, metaPath)
	for i, c := range newCRD.Status.Conditions {
		errs = append(errs, validateCondition(c.Type, corev1.ConditionStatus(c.Status), path.Child("conditions").Index(i))...)
	}
	for i, v := range newCRD.Status.StoredVersions {
		errs = append(errs, required(path.Child("storedVersions").Index(i), v, dnsLabel)...)
	}
	return errs
}

// DefaultCustomResourceDefinition defaults listKind to <kind>List and
// singular to the lower-cased kind.
func DefaultCustomResourceDefinition(crd *apiextv1.CustomResourceDefinition) {
	n := &crd.Spec.Names
	if n.ListKind == "" && n.Kind != "" {
		n.ListKind = n.Kind + "List"
	}
	if n.Singular == "" {
		n.Singular = strings.ToLower(n.Kind)
	}
}

// CustomResourceSchema returns the schema of a CRD's version, or nil.
func CustomResourceSchema(crd *apiextv1.CustomResourceDefinition, version string) *apiextv1.JSONSchemaProps {
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Name == version && v.Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	return nil
}
