package apiserver

import (
	"encoding/json"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// withStatusOf returns base with the status of from: a status update keeps
// everything else of the stored object.
func withStatusOf(base, from runtime.Object) runtime.Object {
	if u, ok := base.(*unstructured.Unstructured); ok {
		fu := from.(*unstructured.Unstructured)
		if st, ok := fu.Object["status"]; ok {
			u.Object["status"] = st
		} else {
			delete(u.Object, "status")
		}
		return u
	}
	bv := reflect.ValueOf(base).Elem().FieldByName("Status")
	fv := reflect.ValueOf(from).Elem().FieldByName("Status")
	if bv.IsValid() && fv.IsValid() && bv.CanSet() {
		bv.Set(fv)
	}
	return base
}

// keepStatus copies the stored status into a main-resource update.
func keepStatus(obj, old runtime.Object) {
	withStatusOf(obj, old)
}

// specChanged reports whether anything but metadata and status differs.
// Typed objects compare their other fields with apiequality.Semantic, as
// Kubernetes' strategies compare a spec to decide on a new generation.
func specChanged(obj, old runtime.Object) bool {
	if _, ok := obj.(*unstructured.Unstructured); !ok {
		a, b := reflect.ValueOf(obj), reflect.ValueOf(old)
		if a.Kind() == reflect.Pointer && b.Type() == a.Type() && a.Elem().Kind() == reflect.Struct {
			a, b = a.Elem(), b.Elem()
			for i := range a.NumField() {
				f := a.Type().Field(i)
				switch {
				case !f.IsExported() || f.Tag.Get("json") == "-":
					continue // not part of the object's JSON
				case f.Name == "TypeMeta" || f.Name == "ObjectMeta" || f.Name == "Status":
					continue
				}
				if !apiequality.Semantic.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
					return true
				}
			}
			return false
		}
	}
	x, y := withoutMetaStatus(obj), withoutMetaStatus(old)
	return !apiequality.Semantic.DeepEqual(x, y)
}

func withoutMetaStatus(obj runtime.Object) map[string]any {
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			m[k] = v
		}
	} else {
		data, err := json.Marshal(obj)
		if err != nil {
			return nil
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return nil
		}
	}
	delete(m, "metadata")
	delete(m, "status")
	delete(m, "apiVersion")
	delete(m, "kind")
	return m
}
