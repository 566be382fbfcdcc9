package apiserver

import (
	"maps"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The field manager's comparison of the stored and the written object
// (structured-merge-diff's Compare, by reflection) is a fifth to a half
// of its work per write (bench/README.md, Session 13). Its result, the fields added, changed and removed, comes
// only from the parts that differ: a part equal in both objects adds no
// field to any set, so leaving it out of both gives the same sets.
// comparedParts hands the field manager shallow copies of both objects
// without
//
//   - the top-level part the write cannot change (status of a main write,
//     spec of a status write), which prepareUpdate copied from the stored
//     object and the field manager ignores (resetFields);
//   - every top-level field equal in both (reflect.DeepEqual, stricter
//     than the comparison's equality: a nil and an empty list differ);
//   - every field one level down (metadata.labels, spec.containers,
//     status.conditions, ...) equal in both, when its parent is a struct
//     or map whose presence the removal cannot change (a parent left
//     empty on either side is kept whole: an omitted parent would read
//     as removed or added).
//
// What the field manager reads besides the comparison is kept: kind and
// apiVersion, metadata.name, namespace, uid (a stored object without
// managedFields and with a uid is not tracked) and managedFields.
// TestComparedPartsGiveTheSameManagedFields pins the equality with the
// whole objects' result.

// keptMeta are the metadata fields the field manager reads outside its
// comparison, by Go name and JSON name.
var keptMeta = map[string]bool{
	"Name": true, "Namespace": true, "UID": true, "ManagedFields": true,
	"name": true, "namespace": true, "uid": true, "managedFields": true,
}

// comparedParts returns copies of live and obj without what they share
// (see above) and without their top-level field unchanged (Go name; ""
// for none), sharing everything else with the originals.
func comparedParts(live, obj runtime.Object, unchanged string) (runtime.Object, runtime.Object) {
	lu, lok := live.(*unstructured.Unstructured)
	ou, ook := obj.(*unstructured.Unstructured)
	if lok && ook {
		l, o := comparedMaps(lu.Object, ou.Object, strings.ToLower(unchanged))
		return &unstructured.Unstructured{Object: l}, &unstructured.Unstructured{Object: o}
	}
	lv, ov := reflect.ValueOf(live), reflect.ValueOf(obj)
	if lv.Type() != ov.Type() || lv.Kind() != reflect.Pointer || lv.Elem().Kind() != reflect.Struct || lv.IsNil() || ov.IsNil() {
		return live, obj
	}
	lc, oc := reflect.New(lv.Elem().Type()), reflect.New(ov.Elem().Type())
	lc.Elem().Set(lv.Elem())
	oc.Elem().Set(ov.Elem())
	t := lc.Elem().Type()
	for i := range t.NumField() {
		f := t.Field(i)
		l, o := lc.Elem().Field(i), oc.Elem().Field(i)
		switch {
		case !f.IsExported() || f.Name == "TypeMeta":
		case f.Name == "ObjectMeta":
			dropEqualFields(l, o, keptMeta)
		case f.Name == unchanged || reflect.DeepEqual(l.Interface(), o.Interface()):
			l.Set(reflect.Zero(f.Type))
			o.Set(reflect.Zero(f.Type))
		default:
			dropEqualFields(l, o, nil)
		}
	}
	return lc.Interface().(runtime.Object), oc.Interface().(runtime.Object)
}

// zeroer is a type that says itself when it is zero; omitzero asks it.
type zeroer interface{ IsZero() bool }

var zeroerType = reflect.TypeFor[zeroer]()

// dropEqualFields zeroes, in l and o (settable fields of one struct or
// map type, or pointers to a struct), the fields or keys equal in both,
// but those in keep. l and o are left as they were when a side would be
// left empty, or when the type decides its own emptiness.
func dropEqualFields(l, o reflect.Value, keep map[string]bool) {
	t := l.Type()
	if t.Implements(zeroerType) || reflect.PointerTo(t).Implements(zeroerType) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if l.IsNil() || o.IsNil() || t.Elem().Kind() != reflect.Struct {
			return
		}
		lc, oc := reflect.New(t.Elem()), reflect.New(t.Elem())
		lc.Elem().Set(l.Elem())
		oc.Elem().Set(o.Elem())
		if dropEqualStructFields(lc.Elem(), oc.Elem(), keep) {
			l.Set(lc)
			o.Set(oc)
		}
	case reflect.Struct:
		lc, oc := reflect.New(t).Elem(), reflect.New(t).Elem()
		lc.Set(l)
		oc.Set(o)
		if dropEqualStructFields(lc, oc, keep) && !lc.IsZero() && !oc.IsZero() {
			l.Set(lc)
			o.Set(oc)
		}
	case reflect.Map:
		if l.Len() == 0 || o.Len() == 0 || t.Key().Kind() != reflect.String {
			return
		}
		lc, oc := reflect.MakeMapWithSize(t, l.Len()), reflect.MakeMapWithSize(t, o.Len())
		for it := l.MapRange(); it.Next(); {
			k := it.Key()
			if ov := o.MapIndex(k); !keep[k.String()] && ov.IsValid() && reflect.DeepEqual(it.Value().Interface(), ov.Interface()) {
				continue
			}
			lc.SetMapIndex(k, it.Value())
		}
		for it := o.MapRange(); it.Next(); {
			k := it.Key()
			if lv := l.MapIndex(k); !keep[k.String()] && lv.IsValid() && reflect.DeepEqual(it.Value().Interface(), lv.Interface()) {
				continue
			}
			oc.SetMapIndex(k, it.Value())
		}
		if lc.Len() > 0 && oc.Len() > 0 {
			l.Set(lc)
			o.Set(oc)
		}
	}
}

// dropEqualStructFields zeroes the exported fields of struct values l
// and o (settable copies) equal in both, but those in keep; it reports
// whether it zeroed any.
func dropEqualStructFields(l, o reflect.Value, keep map[string]bool) bool {
	dropped := false
	t := l.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || keep[f.Name] {
			continue
		}
		lf, of := l.Field(i), o.Field(i)
		if lf.IsZero() && of.IsZero() {
			continue
		}
		if reflect.DeepEqual(lf.Interface(), of.Interface()) {
			lf.Set(reflect.Zero(f.Type))
			of.Set(reflect.Zero(f.Type))
			dropped = true
		}
	}
	return dropped
}

// comparedMaps is comparedParts for custom resources' objects.
func comparedMaps(live, obj map[string]any, unchanged string) (map[string]any, map[string]any) {
	l, o := maps.Clone(live), maps.Clone(obj)
	for key, lv := range live {
		ov, ok := obj[key]
		switch {
		case key == "apiVersion" || key == "kind":
		case key == unchanged:
			delete(l, key)
			delete(o, key)
		case !ok:
		case key != "metadata" && reflect.DeepEqual(lv, ov):
			delete(l, key)
			delete(o, key)
		default:
			lm, lok := lv.(map[string]any)
			om, ook := ov.(map[string]any)
			if !lok || !ook {
				continue
			}
			var keep map[string]bool
			if key == "metadata" {
				keep = keptMeta
			}
			dropEqualFields(reflect.ValueOf(&lm).Elem(), reflect.ValueOf(&om).Elem(), keep)
			l[key], o[key] = lm, om
		}
	}
	if _, ok := obj[unchanged]; ok && unchanged != "" {
		delete(o, unchanged)
	}
	// The field manager replaces obj's managedFields: its own metadata.
	if md, ok := o["metadata"].(map[string]any); ok {
		o["metadata"] = maps.Clone(md)
	}
	return l, o
}
