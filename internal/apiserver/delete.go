package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/internal/storage"
)

// Finalizers the garbage collector acts on.
const (
	finalizerOrphan     = "orphan"
	finalizerForeground = "foregroundDeletion"
)

func (s *Server) deleteOptions(w http.ResponseWriter, r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		var j []byte
		if isProtobuf(r) {
			// client-go's typed clients of Kubernetes' own kinds send
			// DeleteOptions as protobuf.
			j, err = protobufToJSON(body)
		} else {
			j, err = scheme.ToJSON(body)
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if err := scheme.DecodeStrictInto(j, opts); err != nil {
			return nil, apierrors.NewBadRequest("decode DeleteOptions: " + err.Error())
		}
	}
	q := r.URL.Query()
	if g := q.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid gracePeriodSeconds")
		}
		opts.GracePeriodSeconds = &n
	}
	if p := q.Get("propagationPolicy"); p != "" {
		pp := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &pp
	}
	if v, ok := q["dryRun"]; ok {
		opts.DryRun = v
	}
	if _, err := checkDryRun(opts.DryRun, "DeleteOptions"); err != nil {
		return nil, err
	}
	return opts, nil
}

// deleteContext marks ctx as a dry run's when the options (the query's
// dryRun, or the body's) ask for one.
func deleteContext(ctx context.Context, opts *metav1.DeleteOptions) context.Context {
	if len(opts.DryRun) > 0 {
		return withDryRun(ctx)
	}
	return ctx
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	if ri.subresource != "" {
		writeError(w, apierrors.NewMethodNotSupported(k.groupResource(), "delete "+ri.subresource))
		return
	}
	opts, err := s.deleteOptions(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	out, deleted, err := s.deleteObj(deleteContext(r.Context(), opts), k, ri, ri.namespace, ri.name, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	if deleted {
		writeObject(w, http.StatusOK, statusSuccess(&metav1.StatusDetails{Name: ri.name, Group: k.gvk.Group, Kind: k.resource}))
		return
	}
	writeObject(w, http.StatusAccepted, out)
}

// deleteObj deletes at once, or starts a graceful deletion: an object with
// finalizers, or a pod bound to a node (the node agent completes it), only
// gets its deletionTimestamp. A dry run (withDryRun) answers the same and
// changes nothing.
func (s *Server) deleteObj(ctx context.Context, k *kind, ri *requestInfo, ns, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	var deleted bool
	out, err := s.guaranteedUpdate(ctx, k, ns, name, func(cur runtime.Object) (runtime.Object, []storage.Op, error) {
		deleted = false // fn may run again, on a fresher cur
		acc, _ := meta.Accessor(cur)
		if err := checkPreconditions(k, acc, opts); err != nil {
			return nil, nil, err
		}
		if err := s.authorize(ctx, k, ri, "delete", nil, cur); err != nil {
			return nil, nil, err
		}
		addPropagationFinalizer(acc, opts)
		grace, graceSet := graceFrom(opts)
		if pod, ok := cur.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			if !graceSet {
				grace = 30
				if pod.Spec.TerminationGracePeriodSeconds != nil {
					grace = *pod.Spec.TerminationGracePeriodSeconds
				}
			}
			if acc.GetDeletionTimestamp() == nil || grace == 0 {
				acc.SetDeletionGracePeriodSeconds(&grace)
			}
		}
		if acc.GetDeletionTimestamp() == nil {
			acc.SetDeletionTimestamp(now())
		}
		if ns, ok := cur.(*corev1.Namespace); ok {
			ns.Status.Phase = corev1.NamespaceTerminating
		}
		if len(acc.GetFinalizers()) == 0 && !s.blocksDeletion(k, cur) {
			deleted = true
		}
		return cur, nil, nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, deleted || out == nil, nil
}

// blocksDeletion is true for objects that stay after their finalizers are
// gone: a pod bound to a node whose deletion the node agent has not
// completed (it deletes with a zero grace period once the containers are
// stopped and the claims unprepared), and a namespace whose
// spec.finalizers the namespace controller has not cleared.
func (s *Server) blocksDeletion(k *kind, obj runtime.Object) bool {
	switch o := obj.(type) {
	case *corev1.Pod:
		if o.Spec.NodeName == "" {
			return false
		}
		g := o.DeletionGracePeriodSeconds
		return g == nil || *g > 0
	case *corev1.Namespace:
		return len(o.Spec.Finalizers) > 0
	}
	return false
}

func checkPreconditions(k *kind, acc metav1.Object, opts *metav1.DeleteOptions) error {
	if opts == nil || opts.Preconditions == nil {
		return nil
	}
	p := opts.Preconditions
	if p.UID != nil && *p.UID != acc.GetUID() {
		return apierrors.NewConflict(k.groupResource(), acc.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, acc.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != acc.GetResourceVersion() {
		return apierrors.NewConflict(k.groupResource(), acc.GetName(), fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, acc.GetResourceVersion()))
	}
	return nil
}

func addPropagationFinalizer(acc metav1.Object, opts *metav1.DeleteOptions) {
	if acc.GetDeletionTimestamp() != nil {
		return
	}
	var f string
	switch {
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground:
		f = finalizerForeground
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationOrphan,
		opts.OrphanDependents != nil && *opts.OrphanDependents:
		f = finalizerOrphan
	default:
		return
	}
	for _, x := range acc.GetFinalizers() {
		if x == f {
			return
		}
	}
	acc.SetFinalizers(append(acc.GetFinalizers(), f))
}

func (s *Server) serveDeleteCollection(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	opts, err := s.deleteOptions(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := deleteContext(r.Context(), opts)
	pred, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// The whole collection is authorized before anything is deleted: the
	// verb on the collection, then each object as a single delete. A
	// caller may delete all of the selection or none of it.
	if err := s.authorizeSelected(ctx, k, ri, "deletecollection", fs); err != nil {
		writeError(w, err)
		return
	}
	items, _, err := s.listFromCache(ctx, k, ri.namespace, "", pred)
	if err != nil {
		writeError(w, err)
		return
	}
	objs := make([]metav1.Object, 0, len(items))
	for _, it := range items {
		obj, err := decodeStored(k, it.value, it.rev)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		acc, _ := meta.Accessor(obj)
		if err := s.authorize(ctx, k, itemRequest(ri, acc), "delete", nil, obj); err != nil {
			writeError(w, err)
			return
		}
		objs = append(objs, acc)
	}
	for _, acc := range objs {
		if _, _, err := s.deleteObj(ctx, k, itemRequest(ri, acc), acc.GetNamespace(), acc.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
			writeError(w, err)
			return
		}
	}
	writeObject(w, http.StatusOK, statusSuccess(nil))
}

// itemRequest is a collection request narrowed to one of its objects.
func itemRequest(ri *requestInfo, acc metav1.Object) *requestInfo {
	sub := *ri
	sub.name = acc.GetName()
	if sub.namespace == "" {
		sub.namespace = acc.GetNamespace()
	}
	return &sub
}
