package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"allot.dev/allot/api/scheme"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/internal/storage"
)

// serveApply answers PATCH with application/apply-patch+yaml (server-side
// apply), as kube-apiserver does: the applied configuration is merged into
// the live object by the field manager (fieldmanager.go), which records
// the manager's fields and answers 409 naming the managers and fields of
// every conflict unless force=true. The merged object then takes the path
// of an update (prepareUpdate: defaulting, validation, admission,
// authorization as "update", on the object or its status), or, when the
// object does not exist, of a create (authorized as "create"); a status
// apply to a missing object is 404. fieldManager is required
// (checkWriteOptions, 422).
func (s *Server) serveApply(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	patch, err := decodeApplyPatch(k, ri, body)
	if err != nil {
		writeError(w, err)
		return
	}
	force, _ := parseForce(r.URL.Query().Get("force")) // checked by checkWriteOptions
	fm, err := k.fieldManager(ri.subresource)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	a := &applier{k: k, ri: ri, patch: patch, force: force, apply: fm.Apply}
	ri.applied = true
	ctx := r.Context()
	for i := 0; ; i++ {
		out, err := s.guaranteedUpdate(ctx, k, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, []storage.Op, error) {
			if isView(k, cur) {
				return nil, nil, certain{apierrors.NewBadRequest(fmt.Sprintf(
					"%s %s is stored as %s: apply it through that version", k.resource, ri.name, k.sibling.gvk.GroupVersion()))}
			}
			obj, err := a.merge(cur)
			if err != nil {
				return nil, nil, err
			}
			if err := checkPatchedIdentity(k, ri, obj, cur); err != nil {
				return nil, nil, err
			}
			return s.prepareUpdate(ctx, k, ri, obj, cur)
		})
		if !apierrors.IsNotFound(err) || ri.subresource != "" {
			s.answerWrite(ctx, w, k, ri, out, err)
			return
		}
		created, err := s.applyCreate(ctx, a)
		if apierrors.IsAlreadyExists(err) && i == 0 {
			continue // created meanwhile: apply to it
		}
		if err != nil {
			writeError(w, err)
			return
		}
		if created.stored == nil { // dry run
			writeObject(w, http.StatusCreated, created.obj)
			return
		}
		writeRawJSON(w, http.StatusCreated, created.json())
		return
	}
}

// applier merges one applied configuration into live objects.
type applier struct {
	k     *kind
	ri    *requestInfo
	patch *unstructured.Unstructured
	force bool
	apply func(live, applied runtime.Object, manager string, force bool) (runtime.Object, error)
}

// merge applies the configuration to live and returns the result in the
// kind's Go type.
func (a *applier) merge(live runtime.Object) (runtime.Object, error) {
	live.GetObjectKind().SetGroupVersionKind(a.k.gvk)
	out, err := a.apply(live, a.patch.DeepCopy(), a.ri.manager, a.force)
	if err != nil {
		var se apierrors.APIStatus
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("apply %s %s: %v", a.k.gvk.Kind, a.ri.name, err))
	}
	return kindConvertor{a.k}.ConvertToVersion(out, a.k.gvk.GroupVersion())
}

// applyCreate creates the object an apply names from nothing.
func (s *Server) applyCreate(ctx context.Context, a *applier) (*created, error) {
	live := a.k.newObj()
	acc, err := meta.Accessor(live)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	acc.SetName(a.ri.name)
	if a.k.namespaced {
		acc.SetNamespace(a.ri.namespace)
	}
	obj, err := a.merge(live)
	if err != nil {
		return nil, err
	}
	return s.create(ctx, a.k, a.ri, obj)
}

// decodeApplyPatch reads an applied configuration (YAML or JSON). Its
// name and namespace, when given, must be the URL's.
func decodeApplyPatch(k *kind, ri *requestInfo, body []byte) (*unstructured.Unstructured, error) {
	data, err := scheme.ToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest("error decoding YAML: " + err.Error())
	}
	if errs := validation.ValidateQuantityTexts(k.newObj(), data); len(errs) > 0 {
		return nil, apierrors.NewInvalid(k.gvk.GroupKind(), ri.name, errs)
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if err := utiljson.Unmarshal(data, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest("error decoding YAML: " + err.Error())
	}
	if u.Object == nil {
		return nil, apierrors.NewBadRequest("error decoding YAML: the applied configuration is not an object")
	}
	if n := u.GetName(); n != "" && n != ri.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, ri.name))
	}
	if ns := u.GetNamespace(); ns != "" && ns != ri.namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the URL (%s)", ns, ri.namespace))
	}
	return u, nil
}
