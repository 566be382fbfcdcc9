package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// Two versions, one set of objects: ResourceClaims and
// ResourceClaimTemplates are served as resource.k8s.io/v1alpha2 and v1
// from one etcd prefix. Each object is stored in the version it was
// written in; a kind's sibling is the same resource in the other version.
// Reads through the other version get resourceconv's view (metadata,
// status as far as expressible, empty spec, marked with
// StoredVersionAnnotation); writes through a view may change only
// metadata, and are applied to the stored object (see unview).

// linkSiblings pairs the kinds that share a group and resource.
func linkSiblings(kinds []*kind) {
	byGR := map[string]*kind{}
	for _, k := range kinds {
		gr := k.groupResource().String()
		if o := byGR[gr]; o != nil {
			o.sibling, k.sibling = k, o
			continue
		}
		byGR[gr] = k
	}
}

var apiVersionKey = []byte(`"apiVersion":"`)

// storedAPIVersion reads the apiVersion of a stored object: encoding/json
// writes TypeMeta's kind and apiVersion first.
func storedAPIVersion(stored []byte) string {
	head := stored
	if len(head) > 160 {
		head = head[:160]
	}
	i := bytes.Index(head, apiVersionKey)
	if i < 0 {
		return ""
	}
	rest := stored[i+len(apiVersionKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// storedKind returns the kind whose version the stored object is in: k, or
// k's sibling.
func (k *kind) storedKind(stored []byte) *kind {
	if k.sibling == nil {
		return k
	}
	if storedAPIVersion(stored) == k.sibling.gvk.GroupVersion().String() {
		return k.sibling
	}
	return k
}

// markView adds the view annotation naming sk's version to metadata of an
// object stored as sk and read through its sibling.
func markView(m *metav1.ObjectMeta, sk *kind) {
	ann := make(map[string]string, len(m.Annotations)+1)
	for k, v := range m.Annotations {
		ann[k] = v
	}
	ann[resourcev1alpha2.StoredVersionAnnotation] = sk.gvk.GroupVersion().String()
	m.Annotations = ann
}

// StoredVersionField is the selectable field of claims and claim
// templates that holds the apiVersion an object is stored as. Informers
// of one version select on it, so that the other version's objects (their
// views) are never decoded, converted or sent to them.
const StoredVersionField = resourcev1alpha2.StoredVersionAnnotation

// decodeNative decodes a stored object in its own version, whichever of k
// and its sibling that is.
func decodeNative(k *kind, stored []byte, rev int64) (runtime.Object, *kind, error) {
	return decodeNativeWith(k, stored, rev, storedJSON)
}

// decodeNativeWith is decodeNative with the decode's options.
func decodeNativeWith(k *kind, stored []byte, rev int64, opts jsonv2.Options) (runtime.Object, *kind, error) {
	sk := k.storedKind(stored)
	obj, err := decodeAs(sk, stored, rev, opts)
	return obj, sk, err
}

// decodeAs decodes stored JSON into a fresh object of the kind, whose
// version it must be in.
func decodeAs(k *kind, stored []byte, rev int64, opts jsonv2.Options) (runtime.Object, error) {
	obj := k.newObj()
	if err := jsonv2.Unmarshal(stored, obj, opts); err != nil {
		return nil, fmt.Errorf("decode stored %s: %w", k.gvk.Kind, err)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("access metadata: %w", err)
	}
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	return obj, nil
}

// viewOf converts an object of k's sibling to k's version.
func viewOf(k *kind, obj runtime.Object) (runtime.Object, error) {
	v, err := resourceconv.Convert(obj, k.gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	v.GetObjectKind().SetGroupVersionKind(k.gvk)
	return v, nil
}

// viewJSON is what a read through k answers for a stored object: the
// stored bytes with their resourceVersion, or, when the object is stored
// in the sibling's version, its view.
func viewJSON(k *kind, stored []byte, rev int64) ([]byte, error) {
	if k.storedKind(stored) == k {
		return withRV(stored, rev), nil
	}
	obj, err := decodeStored(k, stored, rev)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// writeViewJSON writes viewJSON(k, stored, rev) to buf; an object stored
// in k's version goes in without a copy of its own (writeWithRV), and
// without its managedFields when omitMF (omit.go; a view keeps them).
func writeViewJSON(buf *bytes.Buffer, k *kind, it listed, omitMF bool) error {
	stored, rev := it.value, it.rev
	if k.storedKind(stored) == k {
		if omitMF {
			writeWithRVOmit(buf, stored, rev, it.omit)
		} else {
			writeWithRV(buf, stored, rev)
		}
		return nil
	}
	data, err := viewJSON(k, stored, rev)
	if err != nil {
		return err
	}
	buf.Write(data)
	return nil
}

// isView reports whether obj, read through a kind with a sibling, is a
// view of an object stored in the sibling's version.
func isView(k *kind, obj runtime.Object) bool {
	if k.sibling == nil {
		return false
	}
	acc, err := meta.Accessor(obj)
	return err == nil && resourcev1alpha2.IsView(acc)
}

// dropViewMark removes the view annotation from an object about to be
// stored in its own version: the server sets it on views only.
func dropViewMark(obj runtime.Object) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if ann := acc.GetAnnotations(); ann != nil {
		if _, ok := ann[resourcev1alpha2.StoredVersionAnnotation]; ok {
			delete(ann, resourcev1alpha2.StoredVersionAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			acc.SetAnnotations(ann)
		}
	}
}

// unview turns an update written through a view (next, computed from the
// view cur) into the update of the stored object: only metadata may
// differ from the view; a change to anything else is refused with 422
// naming the field, so nothing the other version cannot express is lost.
// The stored object is read from etcd at cur's revision (a conflict when
// it moved), and the result is validated by its own version's rules.
func (s *Server) unview(ctx context.Context, k *kind, next, cur runtime.Object) (runtime.Object, error) {
	sk := k.sibling
	acc, _ := meta.Accessor(cur)
	stored, err := s.getObj(ctx, sk, acc.GetNamespace(), acc.GetName())
	if err != nil {
		return nil, err
	}
	sacc, _ := meta.Accessor(stored)
	if sacc.GetResourceVersion() != acc.GetResourceVersion() {
		return nil, apierrors.NewConflict(k.groupResource(), acc.GetName(), fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if path := diffBesidesMetadata(next, cur); path != "" {
		return nil, apierrors.NewInvalid(k.gvk.GroupKind(), acc.GetName(), field.ErrorList{field.Forbidden(field.NewPath(path),
			fmt.Sprintf("this %s is stored as %s: only its metadata can be changed through %s; write it through %s",
				k.gvk.Kind, sk.gvk.GroupVersion(), k.gvk.GroupVersion(), sk.gvk.GroupVersion()))})
	}
	out := stored.DeepCopyObject()
	oacc, _ := meta.Accessor(out)
	nacc, _ := meta.Accessor(next)
	oacc.SetLabels(nacc.GetLabels())
	oacc.SetAnnotations(nacc.GetAnnotations())
	dropViewMark(out)
	oacc.SetFinalizers(nacc.GetFinalizers())
	oacc.SetOwnerReferences(nacc.GetOwnerReferences())
	oacc.SetDeletionTimestamp(nacc.GetDeletionTimestamp())
	oacc.SetDeletionGracePeriodSeconds(nacc.GetDeletionGracePeriodSeconds())
	var errs field.ErrorList
	if sk.validateUpd != nil {
		// Deletion fields are the delete path's to set, as on a write
		// through the stored version, where no validation sees them.
		base := stored.DeepCopyObject()
		bacc, _ := meta.Accessor(base)
		if sacc.GetDeletionTimestamp() == nil && oacc.GetDeletionTimestamp() != nil {
			// This write starts the deletion, with the finalizers its
			// propagation policy adds (orphan, foregroundDeletion).
			bacc.SetFinalizers(oacc.GetFinalizers())
		}
		bacc.SetDeletionTimestamp(oacc.GetDeletionTimestamp())
		bacc.SetDeletionGracePeriodSeconds(oacc.GetDeletionGracePeriodSeconds())
		errs = sk.validateUpd(out, base)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(sk.gvk.GroupKind(), acc.GetName(), errs)
	}
	return out, nil
}

// diffBesidesMetadata returns the path of the first difference between a
// and b outside metadata, "" when there is none.
func diffBesidesMetadata(a, b runtime.Object) string {
	ua, errA := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	ub, errB := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if errA != nil || errB != nil {
		return "metadata"
	}
	for _, m := range []map[string]any{ua, ub} {
		delete(m, "metadata")
		delete(m, "apiVersion")
		delete(m, "kind")
	}
	return firstDiff("", ua, ub)
}

func firstDiff(path string, a, b any) string {
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		keys := map[string]bool{}
		for k := range ma {
			keys[k] = true
		}
		for k := range mb {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if d := firstDiff(p, ma[k], mb[k]); d != "" {
				return d
			}
		}
		return ""
	}
	if emptyValue(a) && emptyValue(b) {
		return ""
	}
	if !apiequality.Semantic.DeepEqual(a, b) {
		if path == "" {
			return "spec"
		}
		return path
	}
	return ""
}

// emptyValue treats absent, null, empty maps and empty lists alike, as
// omitempty encodes them.
func emptyValue(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice:
		return rv.Len() == 0
	}
	return false
}

// siblingFields adds to a stored object's selectable fields those its
// sibling version defines, computed on its view (or by sk.viewFields,
// which answers the same without building it), so one watch cache
// answers field selectors of both versions.
func siblingFields(sk *kind, obj runtime.Object, set map[string]string) {
	o := sk.sibling
	if o == nil || o.fields == nil {
		return
	}
	var vf fields.Set
	if sk.viewFields != nil {
		vf = sk.viewFields(obj)
	} else {
		v, err := viewOf(o, obj)
		if err != nil {
			return
		}
		vf = o.fields(v)
	}
	for f, val := range vf {
		if _, ok := set[f]; !ok {
			set[f] = val
		}
	}
}
