package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
)

// quantityMarker stands for the fuzzed text in an object's JSON.
const quantityMarker = "424242424242"

// quantityTemplate is a built-in kind's object with every field that
// takes a quantity present (pointers allocated, one element per list, one
// key "memory" per map) and set to the marker, as JSON, with the paths.
type quantityTemplate struct {
	k     *kind
	json  []byte
	paths []string
}

// quantityTemplates enumerates, by reflection over the served types, every
// built-in kind with a field that takes a quantity: a field added to an
// API type is covered without touching this test.
func quantityTemplates(t testing.TB) []quantityTemplate {
	var out []quantityTemplate
	for _, k := range builtinKinds() {
		obj := k.newObj()
		if _, ok := obj.(*unstructured.Unstructured); ok {
			continue
		}
		fillQuantityShape(reflect.ValueOf(obj), 0)
		var paths []string
		validation.QuantityFields(obj, func(p *field.Path, q *resource.Quantity) {
			*q = resource.MustParse(quantityMarker)
			paths = append(paths, p.String())
		})
		if len(paths) == 0 {
			continue
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("%s: %v", k.gvk.Kind, err)
		}
		out = append(out, quantityTemplate{k: k, json: data, paths: paths})
	}
	return out
}

// fillQuantityShape makes every field on the way to a quantity exist.
func fillQuantityShape(v reflect.Value, depth int) bool {
	if depth > 20 {
		return false
	}
	t := v.Type()
	if t == reflect.TypeOf(resource.Quantity{}) {
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		n := reflect.New(t.Elem())
		if fillQuantityShape(n.Elem(), depth+1) {
			if v.CanSet() {
				v.Set(n)
			} else if !v.IsNil() {
				v.Elem().Set(n.Elem())
			}
			return true
		}
	case reflect.Struct:
		found := false
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() && fillQuantityShape(v.Field(i), depth+1) {
				found = true
			}
		}
		return found
	case reflect.Slice:
		n := reflect.MakeSlice(t, 1, 1)
		if fillQuantityShape(n.Index(0), depth+1) {
			v.Set(n)
			return true
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return false
		}
		e := reflect.New(t.Elem()).Elem()
		if fillQuantityShape(e, depth+1) {
			m := reflect.MakeMap(t)
			m.SetMapIndex(reflect.ValueOf("memory").Convert(t.Key()), e)
			v.Set(m)
			return true
		}
	}
	return false
}

// FuzzQuantityStoredAsWritten writes a text into every field of every
// built-in kind that takes a quantity, through the API server's own path
// (strict decoding with the as-written check, the kind's validation, the
// storage encoding and decoding) and reads it back: either the write is
// refused with an error naming the field, or the amount read back is
// exactly the one written (math/big, from the text itself).
func FuzzQuantityStoredAsWritten(f *testing.F) {
	for _, s := range []string{
		"100000000000000000000000000", "99999999999999999999999Ti", "-99999999999999999999999Ti", "1e400", "1e26",
		"7Ei", "8Ei", "0.0000000001", "1.5n", "1n", "1.5", "9223372036854775807", "9223372036854775808", "80Gi", "0",
		"123456789012345678901234567890", "1e-400", "12345678901234567890123m", ".5", "+1k",
		"1e1000", "1e1001", "0E4444440", "1e-99999999", "1e-1000",
	} {
		f.Add(s)
	}
	templates := quantityTemplates(f)
	if len(templates) < 4 {
		f.Fatalf("only %d kinds take quantities: the reflection missed some", len(templates))
	}
	for _, tpl := range templates {
		f.Logf("%s %s: %s", tpl.k.gvk.GroupVersion(), tpl.k.gvk.Kind, strings.Join(tpl.paths, ", "))
	}
	f.Fuzz(func(t *testing.T, text string) {
		written, ok := validation.ExactQuantity(text)
		if !ok {
			return
		}
		quoted, _ := json.Marshal(text)
		for _, tpl := range templates {
			k := tpl.k
			data := bytes.ReplaceAll(tpl.json, []byte(`"`+quantityMarker+`"`), quoted)
			obj := k.newObj()
			if errs := validation.ValidateQuantityTexts(obj, data); len(errs) > 0 {
				for _, p := range tpl.paths {
					if !namesField(errs, p) {
						t.Fatalf("%s: %q refused before decoding without naming %s: %v", k.gvk.Kind, text, p, errs)
					}
				}
				continue
			}
			if err := scheme.DecodeStrictInto(data, obj); err != nil {
				continue // not a quantity apimachinery reads: refused as a bad request
			}
			errs := validation.ValidateQuantitiesAsWritten(obj, data)
			errs = append(errs, k.validate(obj)...)
			stored, err := encodeForStorage(k, obj)
			if err != nil {
				t.Fatalf("%s: encode: %v", k.gvk.Kind, err)
			}
			back, err := decodeStored(k, stored, 1)
			if err != nil {
				t.Fatalf("%s: decode %s: %v", k.gvk.Kind, stored, err)
			}
			got := map[string]resource.Quantity{}
			validation.QuantityFields(back, func(p *field.Path, q *resource.Quantity) { got[p.String()] = *q })
			for _, p := range tpl.paths {
				if namesField(errs, p) {
					continue
				}
				q, ok := got[p]
				if !ok {
					t.Fatalf("%s: %s accepted but gone after storage", k.gvk.Kind, p)
				}
				if back, _ := validation.ExactQuantity(q.String()); back == nil || back.Cmp(written) != 0 {
					t.Fatalf("%s: %s written as %q, stored as %q", k.gvk.Kind, p, text, q.String())
				}
			}
		}
	})
}

func namesField(errs field.ErrorList, p string) bool {
	for _, e := range errs {
		if e.Field == p || strings.HasPrefix(e.Field, p+".") || strings.HasPrefix(e.Field, p+"[") {
			return true
		}
	}
	return false
}
