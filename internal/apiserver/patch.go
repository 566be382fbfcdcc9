package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	out, err := s.guaranteedUpdate(r.Context(), k, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, []storage.Op, error) {
		curJSON, err := json.Marshal(cur)
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
		if err := checkPatchedIdentity(k, ri, obj, cur); err != nil {
			return nil, nil, err
		}
		return s.prepareUpdate(r.Context(), k, ri, obj, cur)
	})
	s.answerWrite(r.Context(), w, k, ri, out, err)
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
