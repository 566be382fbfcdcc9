package apiserver

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
)

// schemaBuilder derives OpenAPI schemas from Go types by reflection, so the
// documents can never drift from the types. Named struct types become
// components referenced with $ref.
type schemaBuilder struct {
	refPrefix string // "#/components/schemas/" or "#/definitions/"
	defs      map[string]map[string]any
	v2        bool // Swagger 2.0: no anyOf, int-or-string as a format
}

func newSchemaBuilder(refPrefix string) *schemaBuilder {
	return &schemaBuilder{refPrefix: refPrefix, defs: map[string]map[string]any{}, v2: refPrefix == "#/definitions/"}
}

var (
	timeType      = reflect.TypeOf(metav1.Time{})
	microTimeType = reflect.TypeOf(metav1.MicroTime{})
	quantityType  = reflect.TypeOf(resource.Quantity{})
	rawExtType    = reflect.TypeOf(runtime.RawExtension{})
	intOrStrType  = reflect.TypeOf(intstr.IntOrString{})
	propsOrBool   = reflect.TypeOf(apiextv1.JSONSchemaPropsOrBool{})
	jsonProps     = reflect.TypeOf(apiextv1.JSONSchemaProps{})
)

// defName is the component name of a named type, e.g.
// "dev.allot.api.core.v1.Pod" or "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".
func defName(t reflect.Type) string {
	p := t.PkgPath()
	switch {
	case strings.HasPrefix(p, "allot.dev/allot/"):
		p = "dev.allot." + strings.ReplaceAll(strings.TrimPrefix(p, "allot.dev/allot/"), "/", ".")
	case strings.HasPrefix(p, "k8s.io/"):
		p = "io.k8s." + strings.ReplaceAll(strings.TrimPrefix(p, "k8s.io/"), "/", ".")
	default:
		p = strings.ReplaceAll(p, "/", ".")
	}
	return p + "." + t.Name()
}

// schemaOf returns the schema of t, registering named structs as components.
func (b *schemaBuilder) schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType, microTimeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case quantityType, intOrStrType:
		if b.v2 {
			return map[string]any{"type": "string", "format": "int-or-string"}
		}
		return map[string]any{"x-kubernetes-int-or-string": true,
			"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}}
	case rawExtType:
		return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	case propsOrBool, jsonProps:
		return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Int16, reflect.Int8:
		f := "int64"
		if t.Kind() == reflect.Int32 {
			f = "int32"
		}
		return map[string]any{"type": "integer", "format": f}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": b.schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": b.schemaOf(t.Elem())}
	case reflect.Struct:
		name := defName(t)
		if _, ok := b.defs[name]; !ok {
			b.defs[name] = map[string]any{} // placeholder breaks recursion
			b.defs[name] = b.structSchema(t)
		}
		return map[string]any{"$ref": b.refPrefix + name}
	case reflect.Interface:
		return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
	}
	return map[string]any{}
}

func (b *schemaBuilder) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	b.addFields(t, props, &required)
	s := map[string]any{"type": "object", "properties": props}
	if atomicStruct(t) {
		s["x-kubernetes-map-type"] = "atomic"
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (b *schemaBuilder) addFields(t reflect.Type, props map[string]any, required *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				b.addFields(ft, props, required)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		fs := b.schemaOf(f.Type)
		if m := fieldMarkers(t, f, name); len(m) > 0 {
			fs = withExtras(fs, m)
		}
		if ps := f.Tag.Get("patchStrategy"); ps != "" {
			fs = withExtras(fs, map[string]any{"x-kubernetes-patch-strategy": ps})
			if mk := f.Tag.Get("patchMergeKey"); mk != "" {
				fs = withExtras(fs, map[string]any{"x-kubernetes-patch-merge-key": mk})
			}
		}
		props[name] = fs
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer && f.Type.Kind() != reflect.Struct &&
			f.Type.Kind() != reflect.Slice && f.Type.Kind() != reflect.Map && f.Type.Kind() != reflect.Bool {
			*required = append(*required, name)
		}
	}
}

// withExtras adds keys to a schema; a $ref is wrapped in allOf since
// siblings of $ref are ignored.
func withExtras(s map[string]any, extras map[string]any) map[string]any {
	if _, isRef := s["$ref"]; isRef {
		s = map[string]any{"allOf": []any{s}}
	}
	for k, v := range extras {
		s[k] = v
	}
	return s
}

// swagger2Schema drops what Swagger 2.0 cannot express (anyOf, oneOf, not,
// nullable), as Kubernetes does when it publishes CRD schemas in v2.
func swagger2Schema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			switch k {
			case "anyOf", "oneOf", "not", "nullable":
				continue
			}
			out[k] = swagger2Schema(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = swagger2Schema(val)
		}
		return out
	}
	return v
}
