package v1

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MarshalJSON writes true/false, or the schema.
func (s JSONSchemaPropsOrBool) MarshalJSON() ([]byte, error) {
	if s.Schema != nil {
		return json.Marshal(s.Schema)
	}
	if s.Allows {
		return []byte("true"), nil
	}
	return []byte("false"), nil
}

// UnmarshalJSON reads true/false or a schema object.
func (s *JSONSchemaPropsOrBool) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("true")):
		*s = JSONSchemaPropsOrBool{Allows: true}
	case bytes.Equal(data, []byte("false")), bytes.Equal(data, []byte("null")):
		*s = JSONSchemaPropsOrBool{}
	case len(data) > 0 && data[0] == '{':
		var props JSONSchemaProps
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&props); err != nil {
			return fmt.Errorf("decode additionalProperties: %w", err)
		}
		*s = JSONSchemaPropsOrBool{Allows: true, Schema: &props}
	default:
		return fmt.Errorf("additionalProperties must be a boolean or an object")
	}
	return nil
}
