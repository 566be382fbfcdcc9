package client

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// TweakListOptions narrows what an informer lists and watches, for
// example a field selector spec.nodeName=NODE for a node agent's pods.
type TweakListOptions func(*metav1.ListOptions)

// WithFieldSelector returns a tweak that sets a field selector.
func WithFieldSelector(sel string) TweakListOptions {
	return func(o *metav1.ListOptions) { o.FieldSelector = sel }
}

// WithLabelSelector returns a tweak that sets a label selector.
func WithLabelSelector(sel string) TweakListOptions {
	return func(o *metav1.ListOptions) { o.LabelSelector = sel }
}

// ListWatch is a cache.ListerWatcher over a typed Resource.
type ListWatch struct {
	cache.ListWatch
}

// ListWatch returns a lister-watcher over r for informers and reflectors;
// tweaks adjust every list and watch request. A list or watch that cannot
// reach the API server is retried at most a second apart
// (RetryWhileUnreachable), so that the reflector does not back off.
func (r *Resource[T, L]) ListWatch(tweaks ...TweakListOptions) *ListWatch {
	apply := func(o *metav1.ListOptions) {
		for _, t := range tweaks {
			if t != nil {
				t(o)
			}
		}
	}
	skip := skipsViews(r.gvr)
	if skip {
		// The server leaves the other version's objects out: they are
		// never converted or sent. The filters below stay as a guard.
		own := StoredVersionField + "=" + r.gvr.GroupVersion().String()
		user := apply
		apply = func(o *metav1.ListOptions) {
			user(o)
			if o.FieldSelector == "" {
				o.FieldSelector = own
			} else {
				o.FieldSelector += "," + own
			}
		}
	}
	return &ListWatch{ListWatch: cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			apply(&o)
			list, err := RetryWhileUnreachable(ctx, func() (L, error) { return r.List(ctx, o) }, nil)
			if err != nil || !skip {
				return list, err
			}
			return list, dropViews(list)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			apply(&o)
			w, err := RetryWhileUnreachable(ctx, func() (watch.Interface, error) { return r.Watch(ctx, o) }, nil)
			if err != nil || !skip {
				return w, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return e, !isView(e.Object) }), nil
		},
	}}
}

// StoredVersionField is the field selector key of claims and claim
// templates that holds the apiVersion they are stored as (the API
// server's; the same name as resourcev1alpha2.StoredVersionAnnotation).
const StoredVersionField = resourcev1alpha2.StoredVersionAnnotation

// skipsViews reports whether informers of the resource leave out views:
// claims and templates read through the other resource.k8s.io version
// than the one they were written in (resourcev1alpha2.StoredVersionAnnotation).
// A view has no spec; allot's components act on each object through its
// own version.
func skipsViews(gvr schema.GroupVersionResource) bool {
	return gvr.Group == resourcev1alpha2.GroupName &&
		(gvr.Resource == "resourceclaims" || gvr.Resource == "resourceclaimtemplates")
}

func isView(obj runtime.Object) bool {
	acc, err := meta.Accessor(obj)
	return err == nil && resourcev1alpha2.IsView(acc)
}

func dropViews(list runtime.Object) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("read list: %w", err)
	}
	kept := items[:0]
	for _, it := range items {
		if !isView(it) {
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}

// NewInformer builds a shared index informer for r's kind, listing and
// watching r's namespace with tweaks applied. indexers may be nil; the
// namespace index (cache.NamespaceIndex) is always added.
func NewInformer[T runtime.Object, L runtime.Object](r *Resource[T, L], resync time.Duration, indexers cache.Indexers, tweaks ...TweakListOptions) cache.SharedIndexInformer {
	idx := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for k, v := range indexers {
		idx[k] = v
	}
	return cache.NewSharedIndexInformerWithOptions(r.ListWatch(tweaks...), r.NewObject(), cache.SharedIndexInformerOptions{
		ResyncPeriod:      resync,
		Indexers:          idx,
		ObjectDescription: r.gvr.Resource,
	})
}

// Lister reads typed objects from an informer's indexer. The objects are
// shared with the cache: callers must not modify them (DeepCopy first).
type Lister[T runtime.Object] struct {
	indexer  cache.Indexer
	resource schema.GroupResource
}

// NewLister returns a typed view of indexer; resource names the kind in
// NotFound errors.
func NewLister[T runtime.Object](indexer cache.Indexer, resource schema.GroupResource) Lister[T] {
	return Lister[T]{indexer: indexer, resource: resource}
}

// Get returns the object ns/name (ns "" for cluster-scoped kinds), or a
// NotFound error.
func (l Lister[T]) Get(ns, name string) (T, error) {
	var zero T
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, ok, err := l.indexer.GetByKey(key)
	if err != nil {
		return zero, fmt.Errorf("read %s %s from cache: %w", l.resource, key, err)
	}
	if !ok {
		return zero, apierrors.NewNotFound(l.resource, name)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("cache of %s holds a %T", l.resource, obj)
	}
	return t, nil
}

// List returns every cached object that matches selector (nil: all).
func (l Lister[T]) List(selector labels.Selector) ([]T, error) {
	return l.collect(l.indexer.List(), selector)
}

// ListNamespace returns the cached objects of one namespace that match
// selector (nil: all).
func (l Lister[T]) ListNamespace(ns string, selector labels.Selector) ([]T, error) {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return nil, fmt.Errorf("list %s in %s from cache: %w", l.resource, ns, err)
	}
	return l.collect(objs, selector)
}

// ByIndex returns the cached objects whose index value is value.
func (l Lister[T]) ByIndex(index, value string) ([]T, error) {
	objs, err := l.indexer.ByIndex(index, value)
	if err != nil {
		return nil, fmt.Errorf("list %s by %s from cache: %w", l.resource, index, err)
	}
	return l.collect(objs, nil)
}

func (l Lister[T]) collect(objs []any, selector labels.Selector) ([]T, error) {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			return nil, fmt.Errorf("cache of %s holds a %T", l.resource, o)
		}
		if selector != nil && !selector.Empty() {
			acc, err := metaAccessor(t)
			if err != nil {
				return nil, err
			}
			if !selector.Matches(labels.Set(acc.GetLabels())) {
				continue
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// SplitReplacements returns h with one more rule: an update whose new
// object has another UID than the old one is handed to h as the delete of
// the old object (a cache.DeletedFinalStateUnknown tombstone, as for other
// deletions found by a relist) and the add of the new one.
//
// An informer delivers such an update when it relists after its watch
// could not resume (an API server restart, a compaction) and finds the
// name taken by a new object: the old one was deleted and its successor
// created while the informer was not watching, and it keys objects by
// namespace and name, not by UID. Handlers that keep state by UID (an
// owner graph, a cache of pods on nodes, reservations of claims) would
// otherwise keep the deleted object forever. Every informer handler in
// allot that tracks deletions is wrapped with it.
func SplitReplacements(h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: h.AddFunc,
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(metav1.Object)
			n, okNew := newObj.(metav1.Object)
			if !okOld || !okNew || o.GetUID() == n.GetUID() {
				if h.UpdateFunc != nil {
					h.UpdateFunc(oldObj, newObj)
				}
				return
			}
			if h.DeleteFunc != nil {
				key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(oldObj)
				h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: key, Obj: oldObj})
			}
			if h.AddFunc != nil {
				h.AddFunc(newObj)
			}
		},
		DeleteFunc: h.DeleteFunc,
	}
}
