package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/storage"
)

func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, err := s.decodeBody(w, r, k, body)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.create(r.Context(), k, ri, obj)
	if err != nil {
		writeError(w, err)
		return
	}
	if out.stored == nil { // dry run
		writeObject(w, http.StatusCreated, out.obj)
		return
	}
	writeRawJSON(w, http.StatusCreated, out.json())
}

// create runs a new object through defaulting, validation, admission and
// authorization and stores it; a dry run's (withDryRun) is returned unstored.
func (s *Server) create(ctx context.Context, k *kind, ri *requestInfo, obj runtime.Object) (*created, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := fixNamespace(k, ri, acc); err != nil {
		return nil, err
	}
	if acc.GetName() == "" && acc.GetGenerateName() != "" {
		acc.SetName(acc.GetGenerateName() + utilrand.String(5))
	}
	acc.SetUID(types.UID(uuid.NewUUID()))
	acc.SetCreationTimestamp(metav1.Now())
	acc.SetResourceVersion("")
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetGeneration(1)
	if k.hasStatus && k.onCreate != keepStatusOnCreate {
		resetStatus(obj)
	}
	if k.prepareCreate != nil {
		k.prepareCreate(obj)
	}
	s.keepPreparedClaims(ctx, obj, nil)
	if !ri.applied {
		if obj, err = s.trackCreate(k, obj, ri.manager); err != nil {
			return nil, err
		}
		acc, _ = meta.Accessor(obj)
	}
	if errs := k.validate(obj); len(errs) > 0 {
		return nil, apierrors.NewInvalid(k.gvk.GroupKind(), acc.GetName(), errs)
	}
	if err := s.authorize(ctx, k, ri, "create", obj, nil); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		actx := ctx
		if i > 0 {
			actx = context.WithValue(ctx, freshKey{}, true)
		}
		extra, err := s.admit(actx, k, admitCreate, obj, nil)
		if err != nil {
			return nil, err
		}
		out, err := s.createObj(ctx, k, obj, extra)
		if errors.Is(err, errExtraConflict) {
			if i < maxUpdateRetries {
				continue // a quota or epoch moved meanwhile: admit again
			}
			return nil, apierrors.NewConflict(k.groupResource(), acc.GetName(), err)
		}
		if err == nil && !isDryRun(ctx) {
			s.afterWrite(ctx, out.obj)
		}
		return out, err
	}
}

// fixNamespace checks the object's namespace against the URL's.
func fixNamespace(k *kind, ri *requestInfo, acc metav1.Object) error {
	if !k.namespaced {
		if acc.GetNamespace() != "" {
			return apierrors.NewBadRequest(fmt.Sprintf("%s is cluster-scoped: metadata.namespace must be empty", k.gvk.Kind))
		}
		return nil
	}
	if ri.namespace == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s is namespaced: use the /namespaces/NAMESPACE/%s path", k.gvk.Kind, k.resource))
	}
	if acc.GetNamespace() == "" {
		acc.SetNamespace(ri.namespace)
	}
	if acc.GetNamespace() != ri.namespace {
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace of the request (%s)", acc.GetNamespace(), ri.namespace))
	}
	return nil
}

func (s *Server) serveUpdate(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, err := s.decodeBody(w, r, k, body)
	if err != nil {
		writeError(w, err)
		return
	}
	acc, _ := meta.Accessor(obj)
	if acc.GetName() != ri.name {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name in the URL (%s)", acc.GetName(), ri.name)))
		return
	}
	if err := fixNamespace(k, ri, acc); err != nil {
		writeError(w, err)
		return
	}
	wantRV, err := parseRV(acc.GetResourceVersion())
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	out, err := s.guaranteedUpdate(r.Context(), k, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, []storage.Op, error) {
		curRV, _ := revisionOf(cur)
		if wantRV != 0 && wantRV != curRV {
			err := apierrors.NewConflict(k.groupResource(), ri.name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
			if wantRV < curRV {
				// Revisions only grow: even a cached copy newer than the
				// caller's proves the caller's stale.
				return nil, nil, certain{err}
			}
			return nil, nil, err
		}
		return s.prepareUpdate(r.Context(), k, ri, obj.DeepCopyObject(), cur)
	})
	s.answerWrite(r.Context(), w, k, ri, out, err)
}

func (s *Server) answerWrite(ctx context.Context, w http.ResponseWriter, k *kind, ri *requestInfo, out runtime.Object, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	if out != nil && !isDryRun(ctx) {
		s.afterWrite(context.Background(), out)
	}
	if out == nil {
		writeObject(w, http.StatusOK, statusSuccess(&metav1.StatusDetails{Name: ri.name, Group: k.gvk.Group, Kind: k.resource}))
		return
	}
	writeObject(w, http.StatusOK, out)
}

// prepareUpdate turns a client's new state into the state to store: the
// status or main part is carried over from the stored object, immutable
// metadata is kept, and the result is validated, admitted and authorized.
func (s *Server) prepareUpdate(ctx context.Context, k *kind, ri *requestInfo, obj, cur runtime.Object) (runtime.Object, []storage.Op, error) {
	var applied []metav1.ManagedFieldsEntry
	if ri.applied {
		acc, _ := meta.Accessor(obj)
		applied = acc.GetManagedFields()
	}
	if ri.subresource == "status" {
		obj = withStatusOf(cur.DeepCopyObject(), obj)
	} else if ri.subresource == "finalize" {
		obj = withNamespaceFinalizers(cur.DeepCopyObject(), obj)
	} else if isView(k, cur) {
		// A view is not defaulted: its spec is empty by construction,
		// and unview compares it with the view read.
		keepStatus(obj, cur)
	} else if k.prepareUpdate != nil {
		k.prepareUpdate(obj, cur)
	}
	s.keepPreparedClaims(ctx, obj, cur)
	keepExtendedResourceClaim(obj, cur)
	acc, _ := meta.Accessor(obj)
	old, _ := meta.Accessor(cur)
	keepImmutableMeta(acc, old)
	if ri.subresource == "" && specChanged(obj, cur) {
		acc.SetGeneration(old.GetGeneration() + 1)
	}
	switch {
	case isView(k, cur):
		// Ownership is recorded in the stored version's terms only.
		acc.SetManagedFields(old.GetManagedFields())
	case ri.applied:
		// The field manager merged and tracked it (apply.go); a
		// subresource's write above started from cur.
		acc.SetManagedFields(applied)
	default:
		var err error
		if obj, err = s.trackUpdate(k, ri.subresource, cur, obj, ri.manager); err != nil {
			return nil, nil, err
		}
		acc, _ = meta.Accessor(obj)
	}
	var errs field.ErrorList
	switch {
	case isView(k, cur):
		// A write through a view of an object stored in the other
		// version: guaranteedUpdate's unview validates the stored
		// object it turns into.
	case ri.subresource == "status" && k.validateStat != nil:
		errs = k.validateStat(obj, cur)
	case k.validateUpd != nil:
		if k.sibling != nil {
			dropViewMark(obj)
		}
		errs = k.validateUpd(obj, cur)
	}
	if old.GetDeletionTimestamp() != nil {
		errs = append(errs, finalizersOnlyShrink(acc.GetFinalizers(), old.GetFinalizers())...)
	}
	if len(errs) > 0 {
		return nil, nil, apierrors.NewInvalid(k.gvk.GroupKind(), acc.GetName(), errs)
	}
	extra, err := s.admit(ctx, k, admitUpdate, obj, cur)
	if err != nil {
		return nil, nil, err
	}
	if err := s.authorize(ctx, k, ri, "update", obj, cur); err != nil {
		return nil, nil, err
	}
	return obj, extra, nil
}

// finalizersOnlyShrink forbids adding finalizers to an object being deleted.
func finalizersOnlyShrink(now, before []string) field.ErrorList {
	had := map[string]bool{}
	for _, f := range before {
		had[f] = true
	}
	for i, f := range now {
		if !had[f] {
			return field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers").Index(i), "no new finalizers can be added if the object is being deleted")}
		}
	}
	return nil
}

func keepImmutableMeta(acc, old metav1.Object) {
	acc.SetUID(old.GetUID())
	acc.SetCreationTimestamp(old.GetCreationTimestamp())
	acc.SetDeletionTimestamp(old.GetDeletionTimestamp())
	acc.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	acc.SetGeneration(old.GetGeneration())
	acc.SetResourceVersion(old.GetResourceVersion())
	if acc.GetGenerateName() == "" {
		acc.SetGenerateName(old.GetGenerateName())
	}
}

// graceSeconds reads gracePeriodSeconds of DeleteOptions or the query.
func graceFrom(opts *metav1.DeleteOptions) (int64, bool) {
	if opts != nil && opts.GracePeriodSeconds != nil {
		return *opts.GracePeriodSeconds, true
	}
	return 0, false
}

func now() *metav1.Time {
	t := metav1.NewTime(time.Now())
	return &t
}

func hasPrefixAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// withNamespaceFinalizers applies a namespaces/NAME/finalize write: only
// spec.finalizers change.
func withNamespaceFinalizers(base, from runtime.Object) runtime.Object {
	ns, ok := base.(*corev1.Namespace)
	if !ok {
		return base
	}
	ns.Spec.Finalizers = from.(*corev1.Namespace).Spec.Finalizers
	return ns
}

// afterWrite serves a created or changed CRD's kind at once, so a custom
// resource can follow its CRD in the same apply.
func (s *Server) afterWrite(ctx context.Context, obj runtime.Object) {
	if crd, ok := obj.(*apiextv1.CustomResourceDefinition); ok {
		if crd.DeletionTimestamp != nil && len(crd.Finalizers) == 0 {
			return // this write deleted it; followCRDs stops serving it
		}
		if err := s.serveCRD(ctx, crd); err != nil {
			s.log.Error("serve CRD", "crd", crd.Name, "err", err)
		}
	}
}
