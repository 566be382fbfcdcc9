package apiserver

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The update memo's key walk (updateMemo, fieldmanager_updmemo.go):
// an update's compared parts against a remembered update's, by the
// kind's schema.

// updateWalk compares an update's compared parts with a remembered
// update's by the kind's schema (see updateMemo).
type updateWalk struct {
	s    *smdschema.Schema
	root smdschema.TypeRef
	// atomic says the walk is inside an atomic map or struct, which the
	// comparison compares as one value.
	atomic bool
}

// same reports whether l and l0, o and o0 have the same shape and l and
// o differ where l0 and o0 do (see updateMemo); tr is their type in the
// schema. An invalid value is an absent one (a map's missing key, a nil
// pointer); l and o are of one type, l0 and o0 too.
func (w updateWalk) same(l, o, l0, o0 reflect.Value, tr smdschema.TypeRef) bool {
	if l.IsValid() != l0.IsValid() || o.IsValid() != o0.IsValid() {
		return false
	}
	var t reflect.Type
	switch {
	case !l.IsValid() && !o.IsValid():
		return true
	case !l.IsValid():
		t = o.Type()
	default:
		t = l.Type()
		if o.IsValid() && o.Type() != t {
			return false
		}
	}
	if l.IsValid() && l0.Type() != t || o.IsValid() && o0.Type() != t {
		return false
	}
	if l.IsValid() && !l.CanInterface() || o.IsValid() && !o.CanInterface() {
		return bothEqual(l, l0, o, o0)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if l.IsValid() && l.IsNil() != l0.IsNil() || o.IsValid() && o.IsNil() != o0.IsNil() {
			return false
		}
		return w.same(elem(l), elem(o), elem(l0), elem(o0), tr)
	}
	switch classOf(t) {
	case strict:
		return bothEqual(l, l0, o, o0)
	case leafZero, intOrStr:
		if l.IsValid() && !sameShape(l, l0) || o.IsValid() && !sameShape(o, o0) {
			return false
		}
		if !l.IsValid() || !o.IsValid() {
			return true
		}
		a, ok1 := leafEqual(l, o)
		b, ok2 := leafEqual(l0, o0)
		return ok1 && ok2 && a == b
	}
	switch t.Kind() {
	case reflect.Struct:
		return w.sameStruct(l, o, l0, o0, t, tr)
	case reflect.Map:
		return w.sameMap(l, o, l0, o0, t, tr)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Array || t.Elem().Kind() == reflect.Uint8 {
			return bothEqual(l, l0, o, o0)
		}
		a, ok := w.s.Resolve(tr)
		switch {
		case !ok || a.List == nil:
			return bothEqual(l, l0, o, o0)
		case a.List.ElementRelationship == smdschema.Atomic || w.atomic:
			return sameAtomicList(l, o, l0, o0)
		case a.List.ElementRelationship != smdschema.Associative || len(a.List.Keys) == 0:
			return bothEqual(l, l0, o, o0) // sets: the members are the keys
		}
		return w.sameKeyedList(l, o, l0, o0, t, a.List)
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		if l.IsValid() && l.IsZero() != l0.IsZero() || o.IsValid() && o.IsZero() != o0.IsZero() {
			return false
		}
		if !l.IsValid() || !o.IsValid() {
			return true
		}
		a, ok1 := scalarEqual(l, o)
		b, ok2 := scalarEqual(l0, o0)
		return ok1 && ok2 && a == b
	}
	return false // complex numbers, funcs, channels: not in objects
}

// elem is what v (a pointer or interface, or invalid) holds, invalid
// when nil.
func elem(v reflect.Value) reflect.Value {
	if !v.IsValid() || v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

// bothEqual says whether l equals l0 and o equals o0 (strictEqual; an
// invalid value equals only an invalid one).
func bothEqual(l, l0, o, o0 reflect.Value) bool {
	return strictEqual(l, l0) && strictEqual(o, o0)
}

// scalarEqual is the comparison's equality of two plain scalars of one
// type; ok false for a float that is not a number.
func scalarEqual(a, b reflect.Value) (eq, ok bool) {
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String(), true
	case reflect.Bool:
		return a.Bool() == b.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int(), true
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		if math.IsNaN(x) || math.IsNaN(y) {
			return false, false
		}
		return x == y, true
	}
	return a.Uint() == b.Uint(), true
}

// leafEqual compares two values of a leaf type (metav1.Time, MicroTime,
// resource.Quantity, intstr.IntOrString) by the JSON they marshal to,
// which is what the comparison reads of them: times by the instant in
// the precision they are written in (seconds, microseconds; null when
// zero) for years 1 to 9999, where their text is that instant's;
// IntOrString by its type and that type's value; else (quantities, whose
// text is their canonical form) by the text.
func leafEqual(a, b reflect.Value) (eq, ok bool) {
	switch a.Type() {
	case timeType:
		x, y := leafAt[metav1.Time](a), leafAt[metav1.Time](b)
		if x.IsZero() || y.IsZero() {
			return x.IsZero() == y.IsZero(), true
		}
		if plainYear(x.Time) && plainYear(y.Time) {
			return x.Unix() == y.Unix(), true
		}
	case microTimeType:
		x, y := leafAt[metav1.MicroTime](a), leafAt[metav1.MicroTime](b)
		if x.IsZero() || y.IsZero() {
			return x.IsZero() == y.IsZero(), true
		}
		if plainYear(x.Time) && plainYear(y.Time) {
			return x.UnixMicro() == y.UnixMicro(), true
		}
	case intOrStringType:
		x, y := leafAt[intstr.IntOrString](a), leafAt[intstr.IntOrString](b)
		switch {
		case x.Type != y.Type:
			// An int and a string never compare equal; an unknown
			// type does not marshal.
			return false, (x.Type == intstr.Int || x.Type == intstr.String) && (y.Type == intstr.Int || y.Type == intstr.String)
		case x.Type == intstr.Int:
			return x.IntVal == y.IntVal, true
		case x.Type == intstr.String:
			return x.StrVal == y.StrVal, true
		}
	}
	return jsonEqual(a, b)
}

var intOrStringType = reflect.TypeFor[intstr.IntOrString]() // timeType, microTimeType: openapi_schema.go

// leafAt reads v, of type T, without copying it to the heap when it is
// addressable.
func leafAt[T any](v reflect.Value) T {
	if v.CanAddr() {
		return *(*T)(v.Addr().UnsafePointer())
	}
	return v.Interface().(T)
}

// plainYear says whether t's year in UTC is 1 to 9999 (RFC 3339 writes
// it in four digits).
func plainYear(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

// jsonEqual compares two values by the JSON they marshal to.
func jsonEqual(a, b reflect.Value) (eq, ok bool) {
	x, err1 := json.Marshal(a.Interface())
	y, err2 := json.Marshal(b.Interface())
	return bytes.Equal(x, y), err1 == nil && err2 == nil
}

func (w updateWalk) sameStruct(l, o, l0, o0 reflect.Value, t reflect.Type, tr smdschema.TypeRef) bool {
	a, ok := w.s.Resolve(tr)
	fs := fieldsOf(t)
	if !ok || a.Map == nil || fs == nil {
		return bothEqual(l, l0, o, o0)
	}
	if a.Map.ElementRelationship == smdschema.Atomic {
		w.atomic = true
	}
	for _, f := range fs {
		fl, fo, fl0, fo0 := fieldOf(l, f.index), fieldOf(o, f.index), fieldOf(l0, f.index), fieldOf(o0, f.index)
		switch f.how {
		case fieldSkipped:
		case fieldStrict:
			if !bothEqual(fl, fl0, fo, fo0) {
				return false
			}
		case fieldInline:
			if !w.same(fl, fo, fl0, fo0, tr) {
				return false
			}
		default:
			ftr := fieldType(a.Map, f.name)
			if ftr == (smdschema.TypeRef{}) {
				if !bothEqual(fl, fl0, fo, fo0) {
					return false
				}
				continue
			}
			if !w.same(fl, fo, fl0, fo0, ftr) {
				return false
			}
		}
	}
	return true
}

// fieldType is the type of m's field name, or of its unknown fields.
func fieldType(m *smdschema.Map, name string) smdschema.TypeRef {
	if f, ok := m.FindField(name); ok {
		return f.Type
	}
	return m.ElementType
}

func fieldOf(v reflect.Value, i int) reflect.Value {
	if !v.IsValid() {
		return v
	}
	return v.Field(i)
}

func (w updateWalk) sameMap(l, o, l0, o0 reflect.Value, t reflect.Type, tr smdschema.TypeRef) bool {
	a, ok := w.s.Resolve(tr)
	if !ok || a.Map == nil || t.Key().Kind() != reflect.String {
		return bothEqual(l, l0, o, o0)
	}
	if a.Map.ElementRelationship == smdschema.Atomic {
		w.atomic = true
	}
	for _, p := range [][2]reflect.Value{{l, l0}, {o, o0}} {
		if p[0].IsValid() && (p[0].IsNil() != p[1].IsNil() || p[0].Len() != p[1].Len()) {
			return false
		}
	}
	if l.IsValid() {
		for it := l.MapRange(); it.Next(); {
			k := it.Key()
			v0 := l0.MapIndex(k)
			if !v0.IsValid() {
				return false
			}
			var ov, ov0 reflect.Value
			if o.IsValid() {
				ov, ov0 = o.MapIndex(k), o0.MapIndex(k)
			}
			if !w.same(it.Value(), ov, v0, ov0, fieldType(a.Map, k.String())) {
				return false
			}
		}
	}
	if o.IsValid() {
		for it := o.MapRange(); it.Next(); {
			k := it.Key()
			if l.IsValid() && l.MapIndex(k).IsValid() {
				continue
			}
			v0 := o0.MapIndex(k)
			if !v0.IsValid() || !w.same(reflect.Value{}, it.Value(), reflect.Value{}, v0, fieldType(a.Map, k.String())) {
				return false
			}
		}
	}
	return true
}

// sameKeyedList compares associative lists with keys (see updateMemo):
// of structs only, the same length and keys at each index, no key twice;
// entries matched by key as the comparison matches them.
func (w updateWalk) sameKeyedList(l, o, l0, o0 reflect.Value, t reflect.Type, list *smdschema.List) bool {
	keys := keyFields(t.Elem(), list.Keys)
	if keys == nil {
		return bothEqual(l, l0, o, o0)
	}
	for _, p := range [][2]reflect.Value{{l, l0}, {o, o0}} {
		a, b := p[0], p[1]
		if !a.IsValid() {
			continue
		}
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() || a.Len() > 64 {
			return false
		}
		for i := range a.Len() {
			if !sameKeys(a.Index(i), b.Index(i), keys) {
				return false
			}
			for j := range i {
				if sameKeys(a.Index(i), a.Index(j), keys) {
					return false
				}
			}
		}
	}
	var matched uint64
	if l.IsValid() {
		for i := range l.Len() {
			var ov, ov0 reflect.Value
			if o.IsValid() {
				for j := range o.Len() {
					if sameKeys(l.Index(i), o.Index(j), keys) {
						ov, ov0 = o.Index(j), o0.Index(j)
						matched |= 1 << j
						break
					}
				}
			}
			if !w.same(l.Index(i), ov, l0.Index(i), ov0, list.ElementType) {
				return false
			}
		}
	}
	if o.IsValid() {
		for j := range o.Len() {
			if matched&(1<<j) == 0 && !w.same(reflect.Value{}, o.Index(j), reflect.Value{}, o0.Index(j), list.ElementType) {
				return false
			}
		}
	}
	return true
}

// sameAtomicList compares atomic lists, which the comparison takes as
// one leaf: present as null, empty or not alike (l and l0, o and o0),
// and l equal to o exactly when l0 equals o0, by reflect.DeepEqual's
// rule, which is the comparison's equality of two lists of Go values
// (structured-merge-diff's listReflect), finer than their JSON's (an
// empty list inside is not a missing one, a time's nanoseconds count).
// A list inside an atomic map or struct is compared so too, keyed or
// not: the comparison takes the whole as one value.
func sameAtomicList(l, o, l0, o0 reflect.Value) bool {
	for _, p := range [][2]reflect.Value{{l, l0}, {o, o0}} {
		if p[0].IsValid() && (p[0].IsNil() != p[1].IsNil() || (p[0].Len() == 0) != (p[1].Len() == 0)) {
			return false
		}
	}
	if !l.IsValid() || !o.IsValid() {
		return true
	}
	return strictEqual(l, o) == strictEqual(l0, o0)
}

// keyFields are the indices of a struct type's key fields (by JSON
// name), or nil when one is not a plain named field of it.
func keyFields(t reflect.Type, names []string) []int {
	if t.Kind() != reflect.Struct {
		return nil
	}
	key := keyFieldsKey{t, strings.Join(names, "\x00")}
	if ks, ok := keyFieldsCache.Load(key); ok {
		return ks.([]int)
	}
	ks := findKeyFields(t, names)
	keyFieldsCache.Store(key, ks)
	return ks
}

type keyFieldsKey struct {
	t     reflect.Type
	names string
}

var keyFieldsCache sync.Map // keyFieldsKey -> []int

func findKeyFields(t reflect.Type, names []string) []int {
	fs := fieldsOf(t)
	out := make([]int, 0, len(names))
	for _, n := range names {
		at := -1
		for _, f := range fs {
			if f.how == fieldNamed && f.name == n {
				at = f.index
			}
		}
		if at < 0 {
			return nil
		}
		out = append(out, at)
	}
	return out
}

func sameKeys(a, b reflect.Value, keys []int) bool {
	for _, k := range keys {
		if !strictEqual(a.Field(k), b.Field(k)) {
			return false
		}
	}
	return true
}

// How updateWalk compares a struct field.
const (
	fieldNamed   = iota // by its schema type, found by JSON name
	fieldInline         // embedded, its fields the parent's
	fieldStrict         // not read by the comparison: equal
	fieldSkipped        // metadata.managedFields: compared apart
)

type walkField struct {
	index int
	name  string
	how   int
}

var (
	walkFields     sync.Map // reflect.Type -> []walkField (nil: compare equal)
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
)

// fieldsOf is how updateWalk reads a struct type's fields, named as the
// comparison's reflection names them (structured-merge-diff's JSON tag
// rules); nil when two fields, embedded ones' included, have one name.
func fieldsOf(t reflect.Type) []walkField {
	if fs, ok := walkFields.Load(t); ok {
		return fs.([]walkField)
	}
	var fs []walkField
	names := map[string]bool{}
	if flatNames(t, names, 0) {
		for i := range t.NumField() {
			f := t.Field(i)
			wf := walkField{index: i, name: f.Name}
			name, _, _ := cutTag(f.Tag.Get("json"))
			switch {
			case t == objectMetaType && f.Name == "ManagedFields":
				wf.how = fieldSkipped
			case !f.IsExported() && !f.Anonymous || f.Tag.Get("json") == "-":
				wf.how = fieldStrict
			case f.Anonymous && name == "":
				wf.how = fieldInline
			default:
				if name != "" {
					wf.name = name
				}
			}
			fs = append(fs, wf)
		}
	}
	walkFields.Store(t, fs)
	return fs
}

// flatNames adds t's field names, embedded structs' flattened, to names;
// false when one repeats (or embedding is too deep).
func flatNames(t reflect.Type, names map[string]bool, depth int) bool {
	if depth > 8 {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous || f.Tag.Get("json") == "-" {
			continue
		}
		name, _, _ := cutTag(f.Tag.Get("json"))
		if f.Anonymous && name == "" {
			e := f.Type
			if e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if e.Kind() != reflect.Struct {
				return false
			}
			if !flatNames(e, names, depth+1) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if names[name] {
			return false
		}
		names[name] = true
	}
	return true
}

func cutTag(tag string) (name, opts string, found bool) {
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}
