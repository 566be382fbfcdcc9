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
func specChanged(obj, old runtime.Object) bool {
	a, b := withoutMetaStatus(obj), withoutMetaStatus(old)
	return !apiequality.Semantic.DeepEqual(a, b)
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
