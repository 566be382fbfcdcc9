package validation

import (
	"fmt"
	"regexp"
	"slices"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var schemaTypes = []string{"object", "array", "string", "integer", "number", "boolean"}

// SchemaMaxDepth bounds how deeply schema nodes nest (through properties,
// items, additionalProperties and junctors), which bounds the work of
// validating and defaulting custom resources.
const SchemaMaxDepth = 128

// validateRootSchema checks a version's schema: structural, with an object
// at the root.
func validateRootSchema(s *apiextv1.JSONSchemaProps, path *field.Path) field.ErrorList {
	errs := validateSchema(s, path, false, 1)
	if s.Type != "object" {
		errs = append(errs, field.Invalid(path.Child("type"), s.Type, "must be object at the root of a schema"))
	}
	return errs
}

// validateSchema checks one node of a schema and everything below it.
// Inside allOf, anyOf, oneOf and not (a junctor) a node only adds value
// checks, so it may leave out type and items.
func validateSchema(s *apiextv1.JSONSchemaProps, path *field.Path, inJunctor bool, depth int) field.ErrorList {
	if depth > SchemaMaxDepth {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf("schemas may nest at most %d levels deep", SchemaMaxDepth))}
	}
	errs := validateSchemaType(s, path, inJunctor)
	errs = append(errs, validateListMarkers(s, path)...)
	errs = append(errs, validateSchemaBounds(s, path)...)
	errs = append(errs, validateSchemaValues(s, path, inJunctor)...)
	for _, k := range sortedKeys(s.Properties) {
		p := s.Properties[k]
		errs = append(errs, validateSchema(&p, path.Child("properties").Key(k), inJunctor, depth+1)...)
	}
	if s.Items != nil {
		errs = append(errs, validateSchema(s.Items, path.Child("items"), inJunctor, depth+1)...)
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		errs = append(errs, validateSchema(ap.Schema, path.Child("additionalProperties"), inJunctor, depth+1)...)
	}
	junctors := []struct {
		name string
		list []apiextv1.JSONSchemaProps
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}}
	for _, j := range junctors {
		for i := range j.list {
			errs = append(errs, validateSchema(&j.list[i], path.Child(j.name).Index(i), true, depth+1)...)
		}
	}
	if s.Not != nil {
		errs = append(errs, validateSchema(s.Not, path.Child("not"), true, depth+1)...)
	}
	return errs
}

func preservesUnknown(s *apiextv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

// validateSchemaType: a known type, items for arrays, properties only on
// objects.
func validateSchemaType(s *apiextv1.JSONSchemaProps, path *field.Path, inJunctor bool) field.ErrorList {
	var errs field.ErrorList
	tp := path.Child("type")
	switch {
	case s.XIntOrString && s.Type != "":
		errs = append(errs, field.Invalid(tp, s.Type, "must be empty when x-kubernetes-int-or-string is true"))
	case s.Type == "" && !inJunctor && !s.XIntOrString && !preservesUnknown(s):
		errs = append(errs, field.Required(tp, "must be one of object, array, string, integer, number, boolean (or set x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields)"))
	case s.Type != "":
		errs = append(errs, supported(tp, s.Type, schemaTypes...)...)
	}
	if s.Type == "array" && s.Items == nil && !inJunctor {
		errs = append(errs, field.Required(path.Child("items"), "must be set for type array"))
	}
	if s.Items != nil && s.Type != "" && s.Type != "array" {
		errs = append(errs, field.Forbidden(path.Child("items"), "is only allowed for type array"))
	}
	if len(s.Properties) > 0 && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Forbidden(path.Child("properties"), "is only allowed for type object"))
	}
	ap := s.AdditionalProperties
	if ap != nil && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Forbidden(path.Child("additionalProperties"), "is only allowed for type object"))
	}
	if ap != nil && ap.Allows && len(s.Properties) > 0 {
		errs = append(errs, field.Forbidden(path.Child("additionalProperties"), "may not be set together with properties"))
	}
	return errs
}

// validateSchemaBounds: lower bounds not above upper bounds, counts not
// negative.
func validateSchemaBounds(s *apiextv1.JSONSchemaProps, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	pairs := []struct {
		minName, maxName string
		min, max         *int64
	}{
		{"minLength", "maxLength", s.MinLength, s.MaxLength},
		{"minItems", "maxItems", s.MinItems, s.MaxItems},
		{"minProperties", "maxProperties", s.MinProperties, s.MaxProperties},
	}
	for _, pr := range pairs {
		if pr.min != nil {
			errs = append(errs, nonNegative(path.Child(pr.minName), *pr.min)...)
		}
		if pr.max != nil {
			errs = append(errs, nonNegative(path.Child(pr.maxName), *pr.max)...)
		}
		if pr.min != nil && pr.max != nil && *pr.min > *pr.max {
			errs = append(errs, field.Invalid(path.Child(pr.minName), *pr.min, "must not be greater than "+pr.maxName))
		}
	}
	if s.Minimum != nil && s.Maximum != nil && *s.Minimum > *s.Maximum {
		errs = append(errs, field.Invalid(path.Child("minimum"), *s.Minimum, "must not be greater than maximum"))
	}
	return errs
}

// validateSchemaValues: the pattern compiles, enum entries are JSON, and a
// default is JSON that the node's own schema accepts.
func validateSchemaValues(s *apiextv1.JSONSchemaProps, path *field.Path, inJunctor bool) field.ErrorList {
	var errs field.ErrorList
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			errs = append(errs, field.Invalid(path.Child("pattern"), s.Pattern, "must be a valid regular expression: "+err.Error()))
		}
	}
	for i := range s.Enum {
		if _, err := decodeJSONValue(s.Enum[i].Raw); err != nil {
			errs = append(errs, field.Invalid(path.Child("enum").Index(i), omit, "must be a JSON value: "+err.Error()))
		}
	}
	if s.Default == nil {
		return errs
	}
	dp := path.Child("default")
	if inJunctor {
		return append(errs, field.Forbidden(dp, "may not be set inside allOf, anyOf, oneOf or not"))
	}
	val, err := decodeJSONValue(s.Default.Raw)
	if err != nil {
		return append(errs, field.Invalid(dp, omit, "must be a JSON value: "+err.Error()))
	}
	// As in Kubernetes, the default's own nested defaults apply before it
	// is checked, so `default: {}` may rely on its properties' defaults.
	defaultValue(s, val)
	return append(errs, newCRValidator().validate(s, val, dp, true).PrefixDetail("the default does not match the schema: ")...)
}

// validateListMarkers checks x-kubernetes-list-type, -list-map-keys and
// -map-type as Kubernetes does: list types on arrays, a map list's keys
// scalar properties of its object items that every item has (required or
// defaulted), set items scalar, map types on objects.
func validateListMarkers(s *apiextv1.JSONSchemaProps, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.XMapType != nil {
		switch {
		case *s.XMapType != "granular" && *s.XMapType != "atomic":
			errs = append(errs, field.NotSupported(path.Child("x-kubernetes-map-type"), *s.XMapType, []string{"granular", "atomic"}))
		case s.Type != "object":
			errs = append(errs, field.Invalid(path.Child("x-kubernetes-map-type"), *s.XMapType, "must only be used if type is object"))
		}
	}
	if s.XListType == nil {
		if len(s.XListMapKeys) > 0 {
			errs = append(errs, field.Forbidden(path.Child("x-kubernetes-list-map-keys"), "must only be used if x-kubernetes-list-type is map"))
		}
		return errs
	}
	lt := path.Child("x-kubernetes-list-type")
	switch *s.XListType {
	case "atomic", "set", "map":
	default:
		return append(errs, field.NotSupported(lt, *s.XListType, []string{"atomic", "set", "map"}))
	}
	if s.Type != "array" {
		return append(errs, field.Invalid(lt, *s.XListType, "must only be used if type is array"))
	}
	if *s.XListType != "map" && len(s.XListMapKeys) > 0 {
		errs = append(errs, field.Forbidden(path.Child("x-kubernetes-list-map-keys"), "must only be used if x-kubernetes-list-type is map"))
	}
	items := s.Items
	switch *s.XListType {
	case "set":
		if items != nil && (items.Type == "object" || items.Type == "array") {
			errs = append(errs, field.Invalid(lt, "set", "items of a set must be scalars"))
		}
	case "map":
		keys := path.Child("x-kubernetes-list-map-keys")
		if len(s.XListMapKeys) == 0 {
			return append(errs, field.Required(keys, "must be given if x-kubernetes-list-type is map"))
		}
		if items == nil || items.Type != "object" {
			return append(errs, field.Invalid(lt, "map", "items of a map list must be objects"))
		}
		seen := map[string]bool{}
		for i, k := range s.XListMapKeys {
			p, ok := items.Properties[k]
			switch {
			case seen[k]:
				errs = append(errs, field.Duplicate(keys.Index(i), k))
			case !ok:
				errs = append(errs, field.Invalid(keys.Index(i), k, "must be a property of the items"))
			case p.Type == "object" || p.Type == "array":
				errs = append(errs, field.Invalid(keys.Index(i), k, "must be a scalar property of the items"))
			case p.Default == nil && !slices.Contains(items.Required, k):
				errs = append(errs, field.Invalid(keys.Index(i), k, "must be required or have a default in the items"))
			}
			seen[k] = true
		}
	}
	return errs
}
