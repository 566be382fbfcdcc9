package validation

import (
	apiextv1 "allot.dev/allot/api/apiextensions/v1"
)

// DefaultCustomResource applies the schema's defaults to a custom resource
// in place: a property that is missing, or null where the schema does not
// allow null, gets a fresh copy of its default. Defaults are applied from
// the root down, so a defaulted object gets its own properties' defaults
// too. apiVersion, kind and metadata at the root are left alone. A default
// that is not valid JSON is skipped (ValidateCustomResourceDefinition
// reports it).
func DefaultCustomResource(schema *apiextv1.JSONSchemaProps, obj map[string]interface{}) {
	if schema == nil || obj == nil {
		return
	}
	defaultObject(schema, obj, true)
}

func defaultValue(s *apiextv1.JSONSchemaProps, v interface{}) {
	switch val := v.(type) {
	case map[string]interface{}:
		defaultObject(s, val, false)
	case []interface{}:
		if s.Items != nil {
			for _, item := range val {
				defaultValue(s.Items, item)
			}
		}
	}
}

func defaultObject(s *apiextv1.JSONSchemaProps, m map[string]interface{}, root bool) {
	for _, k := range sortedKeys(s.Properties) {
		if root && rootMetaFields[k] {
			continue
		}
		prop := s.Properties[k]
		cur, present := m[k]
		if prop.Default != nil && (!present || (cur == nil && !prop.Nullable)) {
			if d, err := decodeJSONValue(prop.Default.Raw); err == nil && d != nil {
				m[k], cur, present = d, d, true
			}
		}
		if present {
			defaultValue(&prop, cur)
		}
	}
	ap := s.AdditionalProperties
	if ap == nil || ap.Schema == nil {
		return
	}
	for k, v := range m {
		if _, declared := s.Properties[k]; !declared && !(root && rootMetaFields[k]) {
			defaultValue(ap.Schema, v)
		}
	}
}
