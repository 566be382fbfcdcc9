package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"allot.dev/allot/internal/storage"
)

// Patch content types.
const (
	jsonPatchType      = "application/json-patch+json"
	mergePatchType     = "application/merge-patch+json"
	strategicPatchType = "application/strategic-merge-patch+json"
	applyPatchType     = "application/apply-patch+yaml"
)

// isApply reports a server-side apply request.
func isApply(r *http.Request) bool {
	return patchContentType(r) == applyPatchType
}

// patchContentType is the request's media type without parameters.
func patchContentType(r *http.Request) string {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.TrimSpace(ct)
}

func (s *Server) servePatch(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	ct := patchContentType(r)
	switch ct {
	case applyPatchType:
		s.serveApply(w, r, k, ri)
		return
	case jsonPatchType, mergePatchType:
	case strategicPatchType:
		if _, ok := k.newObj().(*unstructured.Unstructured); ok {
			writeError(w, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", k.groupResource(), ri.name,
				"strategic merge patch is not supported for custom resources; use a JSON merge patch", 0, false))
			return
		}
	default:
		writeError(w, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", k.groupResource(), ri.name,
			fmt.Sprintf("unsupported patch type %q (supported: %s, %s, %s, %s)", ct, jsonPatchType, mergePatchType, strategicPatchType, applyPatchType), 0, false))
		return
	}
	patch, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	keepMF := patchMayTouchManagedFields(patch)
	out, err := s.guaranteedUpdate(r.Context(), k, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, []storage.Op, error) {
		curJSON, kept, err := patchTarget(cur, keepMF)
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		patched, err := applyPatch(ct, curJSON, patch, k)
		if err != nil {
			return nil, nil, err
		}
		obj, err := s.decodeJSON(w, r, k, patched)
		if err != nil {
			return nil, nil, err
		}
		if kept != nil {
			if acc, err := meta.Accessor(obj); err == nil {
				acc.SetManagedFields(kept)
			}
		}
		if err := checkPatchedIdentity(k, ri, obj, cur); err != nil {
			return nil, nil, err
		}
		return s.prepareUpdate(r.Context(), k, ri, obj, cur)
	})
	s.answerWrite(r.Context(), w, k, ri, out, err)
}

// patchKeepsManagedFields forces patchTarget to keep managedFields in
// the document (tests compare both paths).
var patchKeepsManagedFields atomic.Bool

// patchMayTouchManagedFields reports whether a patch might name
// metadata.managedFields: it has the word, or a \u escape that could
// spell it.
func patchMayTouchManagedFields(patch []byte) bool {
	return patchKeepsManagedFields.Load() || bytes.Contains(patch, []byte("managedFields")) || bytes.Contains(patch, []byte(`\u`))
}

// patchTarget is the JSON document a patch applies to: cur as it is, or,
// for a typed object and a patch that does not name managedFields (keepMF
// false), cur without them, with a copy of them to give the patched
// object (the patch cannot have changed them). Every patch type would
// otherwise carry them through its parse and encode (a merge patch as
// nested maps), and the patched object's decode would build them again.
// The answer is the same: the patched object has cur's entries either
// way (TestPatchWithoutManagedFieldsIsTheSame).
func patchTarget(cur runtime.Object, keepMF bool) ([]byte, []metav1.ManagedFieldsEntry, error) {
	acc, err := meta.Accessor(cur)
	_, isU := cur.(*unstructured.Unstructured)
	if keepMF || isU || err != nil || len(acc.GetManagedFields()) == 0 {
		data, err := json.Marshal(cur)
		return data, nil, err
	}
	entries := acc.GetManagedFields()
	acc.SetManagedFields(nil)
	data, err := json.Marshal(cur)
	acc.SetManagedFields(entries)
	kept := make([]metav1.ManagedFieldsEntry, len(entries))
	for i := range entries {
		entries[i].DeepCopyInto(&kept[i])
	}
	return data, kept, err
}

func applyPatch(ct string, cur, patch []byte, k *kind) ([]byte, error) {
	switch ct {
	case jsonPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest("decode JSON patch: " + err.Error())
		}
		out, err := p.Apply(cur)
		if err != nil {
			return nil, apierrors.NewBadRequest("apply JSON patch: " + err.Error())
		}
		return out, nil
	case mergePatchType:
		out, err := jsonpatch.MergePatch(cur, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest("apply merge patch: " + err.Error())
		}
		return out, nil
	default:
		out, err := strategicpatch.StrategicMergePatch(cur, patch, k.newObj())
		if err != nil {
			return nil, apierrors.NewBadRequest("apply strategic merge patch: " + err.Error())
		}
		return out, nil
	}
}

// checkPatchedIdentity rejects patches that rename an object, and treats a
// resourceVersion in the patch as a precondition.
func checkPatchedIdentity(k *kind, ri *requestInfo, obj, cur runtime.Object) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	old, _ := meta.Accessor(cur)
	if acc.GetName() != old.GetName() || acc.GetNamespace() != old.GetNamespace() {
		return apierrors.NewBadRequest("a patch may not change metadata.name or metadata.namespace")
	}
	if acc.GetResourceVersion() != old.GetResourceVersion() {
		return apierrors.NewConflict(k.groupResource(), ri.name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return nil
}
