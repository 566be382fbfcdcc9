package controllerutil

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"allot.dev/allot/pkg/client"
)

// MetadataListWatch lists and watches the PartialObjectMetadata of one
// resource in namespace ns ("" for all). Like DynamicListWatch it retries
// requests that cannot reach the API server at most a second apart
// (client.RetryWhileUnreachable), so that the reflector does not back off.
func MetadataListWatch(c metadata.Interface, gvr schema.GroupVersionResource, ns string) cache.ListerWatcher {
	r := c.Resource(gvr).Namespace(ns)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.RetryWhileUnreachable(ctx, func() (runtime.Object, error) { return r.List(ctx, o) }, nil)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.RetryWhileUnreachable(ctx, func() (watch.Interface, error) { return r.Watch(ctx, o) }, nil)
		},
	}
}

// DynamicListWatch lists and watches whole objects of one resource in
// namespace ns ("" for all) as unstructured objects.
func DynamicListWatch(c dynamic.Interface, gvr schema.GroupVersionResource, ns string) cache.ListerWatcher {
	r := c.Resource(gvr).Namespace(ns)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.RetryWhileUnreachable(ctx, func() (runtime.Object, error) { return r.List(ctx, o) }, nil)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.RetryWhileUnreachable(ctx, func() (watch.Interface, error) { return r.Watch(ctx, o) }, nil)
		},
	}
}

// NewInformer builds a shared informer over lw for objects like example,
// resyncing every resync (0: never). It caches the objects without their
// managedFields (client.StripManagedFields), which no controller reads.
func NewInformer(lw cache.ListerWatcher, example runtime.Object, resync time.Duration) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{ResyncPeriod: resync})
	// SetTransform fails only once the informer has started.
	_ = inf.SetTransform(client.StripManagedFields)
	return inf
}

// ObjectMeta returns the metadata of an informer event's object, looking
// through the tombstone a delete event may carry. ok is false for objects
// without metadata.
func ObjectMeta(obj any) (m metav1.Object, ok bool) {
	if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = t.Obj
	}
	m, ok = obj.(metav1.Object)
	return m, ok
}
