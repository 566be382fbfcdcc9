package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
)

// decodeBody decodes a request body into a new object of the kind.
// fieldValidation=Strict (the default) rejects unknown and duplicate fields
// naming their paths; Warn accepts them with a Warning header; Ignore drops
// them silently.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, k *kind, body []byte) (runtime.Object, error) {
	if isProtobuf(r) {
		data, err := protobufToJSON(body)
		if err != nil {
			return nil, err
		}
		return s.decodeJSON(w, r, k, data)
	}
	data, err := scheme.ToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return s.decodeJSON(w, r, k, data)
}

func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, k *kind, data []byte) (runtime.Object, error) {
	obj := k.newObj()
	var target any = obj
	if u, ok := obj.(*unstructured.Unstructured); ok {
		target = &u.Object
	}
	mode := r.URL.Query().Get("fieldValidation")
	// Before decoding: apimachinery takes minutes to parse a quantity
	// with an exponent like e-99999999.
	if errs := validation.ValidateQuantityTexts(obj, data); len(errs) > 0 {
		return nil, apierrors.NewInvalid(k.gvk.GroupKind(), "", errs)
	}
	err := scheme.DecodeStrictInto(data, target)
	var se *scheme.StrictError
	switch {
	case err == nil:
	case asStrict(err, &se) && strings.EqualFold(mode, "Ignore"):
	case asStrict(err, &se) && strings.EqualFold(mode, "Warn"):
		for _, p := range se.Problems {
			// An update may decode its body more than once (a retry after a
			// conflict or a stale cached copy): warn once.
			v := `299 - "` + strings.ReplaceAll(p, `"`, `'`) + `"`
			if !slices.Contains(w.Header().Values("Warning"), v) {
				w.Header().Add("Warning", v)
			}
		}
	case asStrict(err, &se):
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in %s: %s", "strict decoding error", k.gvk.Kind, strings.Join(se.Problems, ", ")))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode %s: %v", k.gvk.Kind, err))
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if (gvk.Kind != "" && gvk.Kind != k.gvk.Kind) || (gvk.Version != "" && gvk.GroupVersion() != k.gvk.GroupVersion()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s %s, but the URL is for %s %s",
			gvk.GroupVersion(), gvk.Kind, k.gvk.GroupVersion(), k.gvk.Kind))
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	// A quantity the parser changed (rounded below 1n, capped at 2^63-1)
	// is refused here, where the text written is still at hand.
	if errs := validation.ValidateQuantitiesAsWritten(obj, data); len(errs) > 0 {
		name := ""
		if acc, err := meta.Accessor(obj); err == nil {
			name = acc.GetName()
		}
		return nil, apierrors.NewInvalid(k.gvk.GroupKind(), name, errs)
	}
	return obj, nil
}

func asStrict(err error, target **scheme.StrictError) bool {
	se, ok := err.(*scheme.StrictError)
	if ok {
		*target = se
	}
	return ok
}

// encodeObj answers with obj.
func writeObject(w http.ResponseWriter, code int, obj runtime.Object) {
	data, err := json.Marshal(obj)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writeRawJSON(w, code, data)
}
