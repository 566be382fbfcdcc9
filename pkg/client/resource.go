package client

import (
	"context"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Resource is the typed client of one kind, scoped to a namespace ("" on a
// namespaced kind: all namespaces). T is the object pointer type (for
// example *corev1.Pod) and L its list type (*corev1.PodList).
type Resource[T runtime.Object, L runtime.Object] struct {
	rc         rest.Interface
	gvr        schema.GroupVersionResource
	namespace  string
	namespaced bool
	newObj     func() T
	newList    func() L
	// noManagedFields: List and Watch leave metadata.managedFields out
	// (WithoutManagedFields).
	noManagedFields bool
}

func newResource[T runtime.Object, L runtime.Object](rc rest.Interface, gv schema.GroupVersion, resource, ns string, namespaced bool, newObj func() T, newList func() L) *Resource[T, L] {
	if !namespaced {
		ns = ""
	}
	return &Resource[T, L]{rc: rc, gvr: gv.WithResource(resource), namespace: ns, namespaced: namespaced, newObj: newObj, newList: newList}
}

// GroupVersionResource names the resource.
func (r *Resource[T, L]) GroupVersionResource() schema.GroupVersionResource { return r.gvr }

// Namespace is the namespace the client is scoped to ("" for all or for a
// cluster-scoped kind).
func (r *Resource[T, L]) Namespace() string { return r.namespace }

// Namespaced reports whether the kind lives in namespaces.
func (r *Resource[T, L]) Namespaced() bool { return r.namespaced }

// NewObject returns a new empty object of the kind.
func (r *Resource[T, L]) NewObject() T { return r.newObj() }

// InNamespace returns the same client scoped to another namespace.
func (r *Resource[T, L]) InNamespace(ns string) *Resource[T, L] {
	cp := *r
	if r.namespaced {
		cp.namespace = ns
	}
	return &cp
}

// nsFor picks the namespace of a request about one object: the client's,
// or with an all-namespaces client, the object's.
func (r *Resource[T, L]) nsFor(objNS string) (string, error) {
	if !r.namespaced {
		return "", nil
	}
	ns := r.namespace
	if ns == "" {
		ns = objNS
	}
	if ns == "" {
		return "", fmt.Errorf("%s: %w", r.gvr.Resource, ErrNoNamespace)
	}
	if objNS != "" && objNS != ns {
		return "", fmt.Errorf("the object's namespace %q does not match the client's %q", objNS, ns)
	}
	return ns, nil
}

func (r *Resource[T, L]) request(verb func() *rest.Request, ns string) *rest.Request {
	return verb().NamespaceIfScoped(ns, r.namespaced).Resource(r.gvr.Resource)
}

// Get reads one object.
func (r *Resource[T, L]) Get(ctx context.Context, name string) (T, error) {
	out := r.newObj()
	ns, err := r.nsFor("")
	if err != nil {
		return out, err
	}
	err = r.request(r.rc.Get, ns).Name(name).Do(ctx).Into(out)
	return out, err
}

// List lists objects, filtered by opts' label and field selectors.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	req := r.request(r.rc.Get, r.namespace).VersionedParams(&opts, parameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	if r.noManagedFields {
		return out, listWithoutManagedFields(req.Param(omitManagedFieldsParam, "true").Do(ctx), out)
	}
	err := req.Do(ctx).Into(out)
	return out, err
}

// Watch streams changes from opts.ResourceVersion ("" or "0": first an
// ADDED event per current object). The watch ends when ctx ends, when the
// server closes it, or on Stop. Events are decoded straight into T (see
// watchDecoder).
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := r.request(r.rc.Get, r.namespace).VersionedParams(&opts, parameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	if r.noManagedFields {
		req = req.Param(omitManagedFieldsParam, "true")
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	var decOpts []jsonv2.Options
	if r.noManagedFields {
		decOpts = append(decOpts, skipManagedFields)
	}
	return watch.NewStreamWatcher(newWatchDecoder(body, r.newObj, decOpts...), watchReporter), nil
}

// Create stores a new object.
func (r *Resource[T, L]) Create(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	acc, err := meta.Accessor(obj)
	if err != nil {
		return out, fmt.Errorf("access metadata: %w", err)
	}
	ns, err := r.nsFor(acc.GetNamespace())
	if err != nil {
		return out, err
	}
	err = r.request(r.rc.Post, ns).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces an object. The object's resourceVersion, when set, is a
// precondition: a stale one fails with a Conflict error.
func (r *Resource[T, L]) Update(ctx context.Context, obj T) (T, error) {
	return r.put(ctx, obj, "")
}

// UpdateStatus replaces an object's status subresource.
func (r *Resource[T, L]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	return r.put(ctx, obj, "status")
}

func (r *Resource[T, L]) put(ctx context.Context, obj T, sub string) (T, error) {
	out := r.newObj()
	acc, err := meta.Accessor(obj)
	if err != nil {
		return out, fmt.Errorf("access metadata: %w", err)
	}
	ns, err := r.nsFor(acc.GetNamespace())
	if err != nil {
		return out, err
	}
	req := r.request(r.rc.Put, ns).Name(acc.GetName())
	if sub != "" {
		req = req.SubResource(sub)
	}
	err = req.Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch changes an object (or one of its subresources, such as "status")
// with a JSON patch, JSON merge patch or strategic merge patch.
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (T, error) {
	out := r.newObj()
	ns, err := r.nsFor("")
	if err != nil {
		return out, err
	}
	patch := func() *rest.Request { return r.rc.Patch(pt) }
	err = r.request(patch, ns).Name(name).SubResource(subresources...).Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete deletes an object. Objects with finalizers, and pods bound to a
// node, are only marked for deletion; they go away later.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	ns, err := r.nsFor("")
	if err != nil {
		return err
	}
	return r.request(r.rc.Delete, ns).Name(name).Body(&opts).Do(ctx).Error()
}
