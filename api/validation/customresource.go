package validation

import (
	"encoding/json"
	"fmt"
	"regexp"
	"unicode/utf8"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"allot.dev/allot/api/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// rootMetaFields are always allowed at the root of a custom resource.
var rootMetaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// ValidateCustomResource checks a custom resource (its unstructured
// content) against the schema of its CRD's version. apiVersion and kind are
// required, metadata is checked as ObjectMeta, and everything else must
// match the schema; a field the schema does not declare is an error unless
// additionalProperties or x-kubernetes-preserve-unknown-fields allow it.
// A nil schema checks only apiVersion, kind and metadata.
func ValidateCustomResource(schema *apiextv1.JSONSchemaProps, obj map[string]interface{}) field.ErrorList {
	errs, _ := validateCustomResourceMeta(obj)
	return append(errs, validateCustomResourceBody(schema, obj)...)
}

// ValidateCustomResourceUpdate checks a write to a custom resource.
func ValidateCustomResourceUpdate(schema *apiextv1.JSONSchemaProps, newObj, oldObj map[string]interface{}) field.ErrorList {
	errs, newMeta := validateCustomResourceMeta(newObj)
	if oldMeta, err := objectMetaOf(oldObj); err == nil && newMeta != nil {
		errs = append(errs, validateObjectMetaChanges(newMeta, oldMeta, metaPath)...)
	}
	return append(errs, validateCustomResourceBody(schema, newObj)...)
}

func validateCustomResourceBody(schema *apiextv1.JSONSchemaProps, obj map[string]interface{}) field.ErrorList {
	if schema == nil {
		return nil
	}
	body := make(map[string]interface{}, len(obj))
	for k, v := range obj {
		if !rootMetaFields[k] {
			body[k] = v
		}
	}
	return newCRValidator().validate(schema, body, nil, true)
}

func validateCustomResourceMeta(obj map[string]interface{}) (field.ErrorList, *metav1.ObjectMeta) {
	var errs field.ErrorList
	for _, k := range []string{"apiVersion", "kind"} {
		if s, ok := obj[k].(string); !ok || s == "" {
			errs = append(errs, field.Required(field.NewPath(k), "must be a non-empty string"))
		}
	}
	m, err := objectMetaOf(obj)
	if err != nil {
		return append(errs, field.Invalid(metaPath, omit, err.Error())), nil
	}
	return append(errs, validateObjectMeta(m, nameIsDNSSubdomain, metaPath)...), m
}

// objectMetaOf decodes metadata strictly, as the scheme decodes built-in
// kinds.
func objectMetaOf(obj map[string]interface{}) (*metav1.ObjectMeta, error) {
	m := &metav1.ObjectMeta{}
	raw, ok := obj["metadata"]
	if !ok {
		return m, nil
	}
	if _, isMap := raw.(map[string]interface{}); !isMap {
		return nil, fmt.Errorf("must be an object")
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	if err := scheme.DecodeStrictInto(data, m); err != nil {
		return nil, fmt.Errorf("is not valid object metadata: %w", err)
	}
	return m, nil
}

// crValidator checks values against a schema. It caches compiled patterns
// and decoded enums for the length of one call.
type crValidator struct {
	patterns map[string]*regexp.Regexp
	enums    map[*runtime.RawExtension]enumSet
}

func newCRValidator() *crValidator {
	return &crValidator{patterns: map[string]*regexp.Regexp{}, enums: map[*runtime.RawExtension]enumSet{}}
}

// child is path.Child that also works at the root (nil path).
func child(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

// self names path in an error, the root included.
func self(path *field.Path) *field.Path {
	if path == nil {
		return field.NewPath("<root>")
	}
	return path
}

// validate checks v against s. strict reports fields the schema does not
// declare; it is off inside junctors, whose nodes declare only part of an
// object.
func (c *crValidator) validate(s *apiextv1.JSONSchemaProps, v interface{}, path *field.Path, strict bool) field.ErrorList {
	at := self(path)
	if v == nil {
		if s.Nullable || (s.Type == "" && !s.XIntOrString) {
			return nil
		}
		return field.ErrorList{field.Invalid(at, nil, "must not be null")}
	}
	if errs := checkType(s, v, at); len(errs) > 0 {
		return errs
	}
	errs := c.checkEnum(s, v, at)
	switch val := v.(type) {
	case map[string]interface{}:
		errs = append(errs, c.object(s, val, path, strict)...)
	case []interface{}:
		errs = append(errs, c.array(s, val, path, strict)...)
	case string:
		errs = append(errs, c.str(s, val, at)...)
	default:
		errs = append(errs, checkNumber(s, v, at)...)
	}
	return append(errs, c.junctors(s, v, path)...)
}

func (c *crValidator) object(s *apiextv1.JSONSchemaProps, m map[string]interface{}, path *field.Path, strict bool) field.ErrorList {
	var errs field.ErrorList
	if s.MinProperties != nil && int64(len(m)) < *s.MinProperties {
		errs = append(errs, field.Invalid(self(path), len(m), fmt.Sprintf("must have at least %d properties", *s.MinProperties)))
	}
	if s.MaxProperties != nil && int64(len(m)) > *s.MaxProperties {
		errs = append(errs, field.TooMany(self(path), len(m), int(min(*s.MaxProperties, 1<<31-1))))
	}
	for _, r := range s.Required {
		// apiVersion, kind and metadata are checked apart from the body.
		if _, ok := m[r]; !ok && !(path == nil && rootMetaFields[r]) {
			errs = append(errs, field.Required(child(path, r), ""))
		}
	}
	ap := s.AdditionalProperties
	for _, k := range sortedKeys(m) {
		kp := child(path, k)
		if prop, ok := s.Properties[k]; ok {
			errs = append(errs, c.validate(&prop, m[k], kp, strict)...)
			continue
		}
		switch {
		case ap != nil && ap.Schema != nil:
			errs = append(errs, c.validate(ap.Schema, m[k], kp, strict)...)
		case ap != nil && ap.Allows, preservesUnknown(s), s.XEmbeddedResource && rootMetaFields[k]:
		case ap != nil || strict:
			errs = append(errs, field.Forbidden(kp, "unknown field: the schema does not declare it"))
		}
	}
	return errs
}

func (c *crValidator) array(s *apiextv1.JSONSchemaProps, a []interface{}, path *field.Path, strict bool) field.ErrorList {
	var errs field.ErrorList
	if s.MinItems != nil && int64(len(a)) < *s.MinItems {
		errs = append(errs, field.Invalid(self(path), len(a), fmt.Sprintf("must have at least %d items", *s.MinItems)))
	}
	if s.MaxItems != nil && int64(len(a)) > *s.MaxItems {
		errs = append(errs, field.TooMany(self(path), len(a), int(min(*s.MaxItems, 1<<31-1))))
	}
	if s.UniqueItems {
		seen := make(map[string]bool, len(a))
		for i, item := range a {
			key := canonicalJSON(item)
			if seen[key] {
				errs = append(errs, field.Duplicate(path.Index(i), shortValue(item)))
			}
			seen[key] = true
		}
	}
	if s.Items != nil {
		for i, item := range a {
			errs = append(errs, c.validate(s.Items, item, path.Index(i), strict)...)
		}
	}
	return errs
}

func (c *crValidator) str(s *apiextv1.JSONSchemaProps, v string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := int64(utf8.RuneCountInString(v))
	if s.MinLength != nil && n < *s.MinLength {
		errs = append(errs, field.Invalid(path, v, fmt.Sprintf("must be at least %d characters long", *s.MinLength)))
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		errs = append(errs, field.TooLongCharacters(path, v, int(min(*s.MaxLength, 1<<31-1))))
	}
	if s.Pattern == "" {
		return errs
	}
	re, ok := c.patterns[s.Pattern]
	if !ok {
		re, _ = regexp.Compile(s.Pattern)
		c.patterns[s.Pattern] = re
	}
	switch {
	case re == nil:
		errs = append(errs, field.Invalid(path, v, "cannot be checked: the schema's pattern is not a valid regular expression"))
	case !re.MatchString(v):
		errs = append(errs, field.Invalid(path, v, fmt.Sprintf("must match the pattern %q", s.Pattern)))
	}
	return errs
}

// enumSet is a schema's enum, decoded: keys to compare, display to show.
type enumSet struct {
	keys, display []string
}

func (c *crValidator) checkEnum(s *apiextv1.JSONSchemaProps, v interface{}, path *field.Path) field.ErrorList {
	if len(s.Enum) == 0 {
		return nil
	}
	set, ok := c.enums[&s.Enum[0]]
	if !ok {
		for i := range s.Enum {
			ev, err := decodeJSONValue(s.Enum[i].Raw)
			if err != nil {
				continue
			}
			set.keys = append(set.keys, canonicalJSON(ev))
			if str, isStr := ev.(string); isStr {
				set.display = append(set.display, str)
			} else {
				set.display = append(set.display, canonicalJSON(ev))
			}
		}
		c.enums[&s.Enum[0]] = set
	}
	key := canonicalJSON(v)
	for _, k := range set.keys {
		if k == key {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, shortValue(v), set.display)}
}

// junctors applies allOf, anyOf, oneOf and not. Their own error details
// are not repeated: a branch that does not match is expected.
func (c *crValidator) junctors(s *apiextv1.JSONSchemaProps, v interface{}, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range s.AllOf {
		errs = append(errs, c.validate(&s.AllOf[i], v, path, false)...)
	}
	if len(s.AnyOf) > 0 && c.matches(s.AnyOf, v, path, 1) == 0 {
		errs = append(errs, field.Invalid(self(path), shortValue(v), "must match at least one of the schemas in anyOf"))
	}
	if len(s.OneOf) > 0 {
		if n := c.matches(s.OneOf, v, path, 2); n != 1 {
			errs = append(errs, field.Invalid(self(path), shortValue(v), fmt.Sprintf("must match exactly one of the schemas in oneOf, matches %s", map[int]string{0: "none", 2: "more than one"}[n])))
		}
	}
	if s.Not != nil && len(c.validate(s.Not, v, path, false)) == 0 {
		errs = append(errs, field.Invalid(self(path), shortValue(v), "must not match the schema in not"))
	}
	return errs
}

// matches counts the schemas v matches, stopping at limit.
func (c *crValidator) matches(list []apiextv1.JSONSchemaProps, v interface{}, path *field.Path, limit int) int {
	n := 0
	for i := range list {
		if len(c.validate(&list[i], v, path, false)) == 0 {
			if n++; n == limit {
				break
			}
		}
	}
	return n
}
