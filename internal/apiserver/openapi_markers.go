package apiserver

import (
	"reflect"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	"allot.dev/allot/api/scheme"
)

// List and map semantics (x-kubernetes-list-type, -list-map-keys,
// -map-type) of every built-in kind, served in the OpenAPI documents and
// turned into the field manager's type converter (fieldmanager.go), so
// what kubectl reads and how server-side apply merges can never differ.
// Where they come from, first match wins:
//
//  1. struct tags on allot's own types, mirroring Kubernetes' comment
//     markers: `listType:"map" listMapKey:"driver,pool"`, `listType:"set"`,
//     `listType:"atomic"`, `mapType:"atomic"`;
//  2. the schema Kubernetes publishes (client-go's applyconfigurations),
//     for k8s.io/api and apimachinery types by their own names and for
//     allot's core/v1 subset by the name of the Kubernetes type it copies;
//  3. none: a list is atomic, a map and a struct granular, as in
//     Kubernetes for fields without markers.

var (
	upstreamOnce sync.Once
	upstreamSMD  *smdschema.Schema
)

// upstream is Kubernetes' published schema of its API types, or nil when
// client-go's could not be read (then only struct tags give markers).
func upstream() *smdschema.Schema {
	upstreamOnce.Do(func() {
		tc := applyconfigurations.NewTypeConverter(scheme.Scheme)
		probe := &resourcev1.DeviceClass{TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "DeviceClass"}}
		tv, err := tc.ObjectToTyped(probe)
		if err != nil {
			return
		}
		upstreamSMD = tv.Schema()
	})
	return upstreamSMD
}

const allotCorePkg = "allot.dev/allot/api/core/v1"

// upstreamName is the name of t's type in Kubernetes' schema, "" if none.
func upstreamName(t reflect.Type) string {
	p := t.PkgPath()
	switch {
	case strings.HasPrefix(p, "k8s.io/"):
		return defName(t)
	case p == allotCorePkg:
		return "io.k8s.api.core.v1." + t.Name()
	}
	return ""
}

// upstreamField is the Kubernetes schema of field name of struct t.
func upstreamField(t reflect.Type, name string) (smdschema.StructField, bool) {
	s := upstream()
	n := upstreamName(t)
	if s == nil || n == "" {
		return smdschema.StructField{}, false
	}
	td, ok := s.FindNamedType(n)
	if !ok || td.Atom.Map == nil {
		return smdschema.StructField{}, false
	}
	return td.Atom.Map.FindField(name)
}

// atomicStruct reports a struct type Kubernetes marks +structType=atomic.
func atomicStruct(t reflect.Type) bool {
	s := upstream()
	n := upstreamName(t)
	if s == nil || n == "" {
		return false
	}
	td, ok := s.FindNamedType(n)
	return ok && td.Atom.Map != nil && td.Atom.Map.ElementRelationship == smdschema.Atomic
}

// fieldMarkers returns the x-kubernetes-* extensions, and Kubernetes'
// default value when it has one, of field f (JSON name) of struct t.
func fieldMarkers(t reflect.Type, f reflect.StructField, name string) map[string]any {
	ft := f.Type
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	out := map[string]any{}
	if lt := f.Tag.Get("listType"); lt != "" {
		out["x-kubernetes-list-type"] = lt
		if keys := f.Tag.Get("listMapKey"); keys != "" {
			out["x-kubernetes-list-map-keys"] = toAny(strings.Split(keys, ","))
		}
	}
	if mt := f.Tag.Get("mapType"); mt != "" {
		out["x-kubernetes-map-type"] = mt
	}
	up, ok := upstreamField(t, name)
	if !ok {
		return out
	}
	switch d := up.Default.(type) {
	case string, bool, int, int64, float64:
		// Scalar defaults only: they are what structured-merge-diff
		// needs, for the keys of keyed lists (a port's protocol).
		out["default"] = d
	}
	if len(out) > 0 && (out["x-kubernetes-list-type"] != nil || out["x-kubernetes-map-type"] != nil) {
		return out
	}
	atom, ok := upstream().Resolve(up.Type)
	if !ok {
		return out
	}
	switch {
	case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && atom.List != nil:
		switch rel := atom.List.ElementRelationship; {
		case rel == smdschema.Associative && len(atom.List.Keys) > 0:
			if keys := presentKeys(ft.Elem(), atom.List.Keys); len(keys) > 0 {
				out["x-kubernetes-list-type"] = "map"
				out["x-kubernetes-list-map-keys"] = toAny(keys)
			}
		case rel == smdschema.Associative:
			out["x-kubernetes-list-type"] = "set"
		}
	case (ft.Kind() == reflect.Map || ft.Kind() == reflect.Struct) && atom.Map != nil:
		if atom.Map.ElementRelationship == smdschema.Atomic {
			out["x-kubernetes-map-type"] = "atomic"
		}
	}
	return out
}

// presentKeys returns keys if the element type has a field for each of
// them; allot's subset of a Kubernetes type may lack one, and a key no
// item can carry would make every item invalid.
func presentKeys(elem reflect.Type, keys []string) []string {
	for elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	if elem.Kind() != reflect.Struct {
		return nil
	}
	have := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			have[name] = true
		}
	}
	walk(elem)
	for _, k := range keys {
		if !have[k] {
			return nil
		}
	}
	return keys
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
