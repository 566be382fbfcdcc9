package validation

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// decodeJSONValue decodes a schema's enum entry or default the way custom
// resources are decoded: integers as int64, other numbers as float64. An
// empty value is JSON null.
func decodeJSONValue(raw []byte) (interface{}, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v interface{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// number reads a JSON number, which may arrive as any Go integer or float
// type or as json.Number. isInt is true for integers and for floats
// without a fractional part.
func number(v interface{}) (f float64, isInt, ok bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true, true
	case int32:
		return float64(n), true, true
	case int64:
		return float64(n), true, true
	case uint32:
		return float64(n), true, true
	case uint64:
		return float64(n), true, true
	case float32:
		f = float64(n)
	case float64:
		f = n
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return float64(i), true, true
		}
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, false, false
		}
	default:
		return 0, false, false
	}
	return f, isIntegral(f), !math.IsNaN(f) && !math.IsInf(f, 0)
}

func isIntegral(f float64) bool {
	return !math.IsNaN(f) && !math.IsInf(f, 0) && f == math.Trunc(f) && math.Abs(f) < 1<<63
}

// jsonKind names the JSON type of v: object, array, string, boolean,
// integer or number; "" for a Go value that JSON cannot hold.
func jsonKind(v interface{}) string {
	switch v.(type) {
	case map[string]interface{}:
		return "object"
	case []interface{}:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	if _, isInt, ok := number(v); ok {
		if isInt {
			return "integer"
		}
		return "number"
	}
	return ""
}

func checkType(s *apiextv1.JSONSchemaProps, v interface{}, path *field.Path) field.ErrorList {
	kind := jsonKind(v)
	switch {
	case kind == "":
		return field.ErrorList{field.Invalid(path, fmt.Sprintf("%T", v), "is not a JSON value")}
	case s.XIntOrString:
		if kind != "integer" && kind != "string" {
			return field.ErrorList{field.TypeInvalid(path, shortValue(v), "must be an integer or a string")}
		}
	case s.Type == "", s.Type == kind, s.Type == "number" && kind == "integer":
	default:
		return field.ErrorList{field.TypeInvalid(path, shortValue(v), "must be of type "+s.Type)}
	}
	return nil
}

func checkNumber(s *apiextv1.JSONSchemaProps, v interface{}, path *field.Path) field.ErrorList {
	f, _, ok := number(v)
	if !ok {
		return nil
	}
	var errs field.ErrorList
	if m := s.Minimum; m != nil && (f < *m || (s.ExclusiveMinimum && f == *m)) {
		errs = append(errs, field.Invalid(path, shortValue(v), boundMessage("greater than", *m, s.ExclusiveMinimum)))
	}
	if m := s.Maximum; m != nil && (f > *m || (s.ExclusiveMaximum && f == *m)) {
		errs = append(errs, field.Invalid(path, shortValue(v), boundMessage("less than", *m, s.ExclusiveMaximum)))
	}
	return errs
}

func boundMessage(rel string, bound float64, exclusive bool) string {
	if exclusive {
		return fmt.Sprintf("must be %s %v", rel, bound)
	}
	return fmt.Sprintf("must be %s or equal to %v", rel, bound)
}

// shortValue is v for a scalar; objects and arrays are left out of
// messages.
func shortValue(v interface{}) interface{} {
	switch v.(type) {
	case map[string]interface{}, []interface{}:
		return omit
	}
	return v
}

// canonicalJSON renders v so that equal JSON values render equal: map keys
// sorted, 2 and 2.0 alike.
func canonicalJSON(v interface{}) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v interface{}) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		b.WriteString(strconv.Quote(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case map[string]interface{}:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k) + ":")
			writeCanonical(b, t[k])
		}
		b.WriteByte('}')
	case []interface{}:
		b.WriteByte('[')
		for i, item := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, item)
		}
		b.WriteByte(']')
	default:
		writeCanonicalNumber(b, v)
	}
}

func writeCanonicalNumber(b *strings.Builder, v interface{}) {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			b.WriteString(strconv.FormatInt(i, 10))
			return
		}
	}
	f, isInt, ok := number(v)
	switch {
	case !ok:
		fmt.Fprintf(b, "%T:%v", v, v)
	case isInt:
		b.WriteString(strconv.FormatInt(int64(f), 10))
	default:
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	}
}
