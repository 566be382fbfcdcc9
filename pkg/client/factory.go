package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// Informer is a shared informer of one kind with a typed lister over its
// cache.
type Informer[T runtime.Object] struct {
	cache.SharedIndexInformer
	resource schema.GroupResource
}

// Lister returns a typed view of the informer's cache.
func (i Informer[T]) Lister() Lister[T] {
	return NewLister[T](i.GetIndexer(), i.resource)
}

// Factory shares one informer per kind among the components of a process.
// Ask for informers (f.Pods(), InformerFor(f, r)), register event handlers,
// then Start and WaitForCacheSync. Informers asked for after Start run at
// the next Start.
type Factory struct {
	c         *Client
	resync    time.Duration
	namespace string
	tweaks    []TweakListOptions
	perKind   map[string][]TweakListOptions
	// noManagedFields: informers leave metadata.managedFields out
	// (WithoutManagedFields).
	noManagedFields bool

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	started   map[schema.GroupVersionResource]bool
	wg        sync.WaitGroup
}

// FactoryOption configures a Factory.
type FactoryOption func(*Factory)

// WithNamespace restricts the factory's namespaced informers to one
// namespace.
func WithNamespace(ns string) FactoryOption { return func(f *Factory) { f.namespace = ns } }

// WithTweak applies a tweak to every informer of the factory.
func WithTweak(t TweakListOptions) FactoryOption {
	return func(f *Factory) { f.tweaks = append(f.tweaks, t) }
}

// WithTweakFor applies a tweak to the informer of one resource (plural
// name, for example "pods"), such as a node agent's spec.nodeName selector.
func WithTweakFor(resource string, t TweakListOptions) FactoryOption {
	return func(f *Factory) { f.perKind[resource] = append(f.perKind[resource], t) }
}

// WithoutManagedFields makes the factory's informers leave
// metadata.managedFields out of the objects they decode and cache
// (Resource.WithoutManagedFields): for components that never read them,
// as Kubernetes' scheduler and controller manager strip them. An object
// from such an informer may be sent back in an Update: the API server
// keeps its stored managedFields.
func WithoutManagedFields() FactoryOption { return func(f *Factory) { f.noManagedFields = true } }

// NewFactory returns a factory whose informers resync every resync (0:
// never).
func NewFactory(c *Client, resync time.Duration, opts ...FactoryOption) *Factory {
	f := &Factory{
		c: c, resync: resync, perKind: map[string][]TweakListOptions{},
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		started:   map[schema.GroupVersionResource]bool{},
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// InformerFor returns the factory's shared informer of r's kind, creating
// it on first use. r's namespace is ignored: the factory's applies.
func InformerFor[T runtime.Object, L runtime.Object](f *Factory, r *Resource[T, L]) Informer[T] {
	r = r.InNamespace(f.namespace)
	if f.noManagedFields {
		r = r.WithoutManagedFields()
	}
	gvr := r.GroupVersionResource()
	f.mu.Lock()
	defer f.mu.Unlock()
	inf, ok := f.informers[gvr]
	if !ok {
		tweaks := append(append([]TweakListOptions{}, f.tweaks...), f.perKind[gvr.Resource]...)
		inf = NewInformer(r, f.resync, nil, tweaks...)
		f.informers[gvr] = inf
	}
	return Informer[T]{SharedIndexInformer: inf, resource: gvr.GroupResource()}
}

// Start runs every informer not yet started until ctx ends.
func (f *Factory) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for gvr, inf := range f.informers {
		if f.started[gvr] {
			continue
		}
		f.started[gvr] = true
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			inf.RunWithContext(ctx)
		}()
	}
}

// WaitForCacheSync blocks until every started informer has synced, or ctx
// ends; then it names the informers that have not synced.
func (f *Factory) WaitForCacheSync(ctx context.Context) error {
	f.mu.Lock()
	waiting := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for gvr, inf := range f.informers {
		if f.started[gvr] {
			waiting[gvr] = inf
		}
	}
	f.mu.Unlock()
	var missing []string
	for gvr, inf := range waiting {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			missing = append(missing, gvr.GroupResource().String())
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("sync informers of %s: %w", strings.Join(missing, ", "), context.Cause(ctx))
	}
	return nil
}

// Shutdown waits for the informers' goroutines to end; cancel the context
// given to Start first.
func (f *Factory) Shutdown() { f.wg.Wait() }

// Pods is the shared informer of Pods.
func (f *Factory) Pods() Informer[*corev1.Pod] { return InformerFor(f, f.c.Pods("")) }

// Nodes is the shared informer of Nodes.
func (f *Factory) Nodes() Informer[*corev1.Node] { return InformerFor(f, f.c.Nodes()) }

// NodeLeases is the shared informer of the nodes' heartbeat Leases (all
// Leases; the node lifecycle controller looks up kube-node-lease/NAME).
func (f *Factory) NodeLeases() Informer[*coordinationv1.Lease] { return InformerFor(f, f.c.Leases("")) }

// Namespaces is the shared informer of Namespaces.
func (f *Factory) Namespaces() Informer[*corev1.Namespace] { return InformerFor(f, f.c.Namespaces()) }

// Events is the shared informer of Events.
func (f *Factory) Events() Informer[*corev1.Event] { return InformerFor(f, f.c.Events("")) }

// ResourceQuotas is the shared informer of ResourceQuotas.
func (f *Factory) ResourceQuotas() Informer[*corev1.ResourceQuota] {
	return InformerFor(f, f.c.ResourceQuotas(""))
}

// ResourceClasses is the shared informer of ResourceClasses.
func (f *Factory) ResourceClasses() Informer[*resourcev1alpha2.ResourceClass] {
	return InformerFor(f, f.c.ResourceClasses())
}

// ResourceClaims is the shared informer of ResourceClaims.
func (f *Factory) ResourceClaims() Informer[*resourcev1alpha2.ResourceClaim] {
	return InformerFor(f, f.c.ResourceClaims(""))
}

// DeviceClasses is the shared informer of resource.k8s.io/v1 DeviceClasses.
func (f *Factory) DeviceClasses() Informer[*resourcev1.DeviceClass] {
	return InformerFor(f, f.c.DeviceClasses())
}

// ResourceSlices is the shared informer of resource.k8s.io/v1
// ResourceSlices. Its devices share equal attribute and capacity maps
// (InternDeviceMaps): read them, never modify them.
func (f *Factory) ResourceSlices() Informer[*resourcev1.ResourceSlice] {
	inf := InformerFor(f, f.c.ResourceSlices())
	// Set when the informer is made, before it can start; later calls
	// find it set (and SetTransform refuses a started informer).
	_ = inf.SetTransform(InternDeviceMaps)
	return inf
}

// DeviceTaintRules is the shared informer of resource.k8s.io/v1 DeviceTaintRules.
func (f *Factory) DeviceTaintRules() Informer[*resourcev1.DeviceTaintRule] {
	return InformerFor(f, f.c.DeviceTaintRules())
}

// ResourceClaimsV1 is the shared informer of resource.k8s.io/v1
// ResourceClaims (claims written as v1alpha2 are left out).
func (f *Factory) ResourceClaimsV1() Informer[*resourcev1.ResourceClaim] {
	return InformerFor(f, f.c.ResourceClaimsV1(""))
}

// ResourceClaimTemplatesV1 is the shared informer of resource.k8s.io/v1
// ResourceClaimTemplates (templates written as v1alpha2 are left out).
func (f *Factory) ResourceClaimTemplatesV1() Informer[*resourcev1.ResourceClaimTemplate] {
	return InformerFor(f, f.c.ResourceClaimTemplatesV1(""))
}

// ResourceClaimTemplates is the shared informer of ResourceClaimTemplates.
func (f *Factory) ResourceClaimTemplates() Informer[*resourcev1alpha2.ResourceClaimTemplate] {
	return InformerFor(f, f.c.ResourceClaimTemplates(""))
}

// PodSchedulingContexts is the shared informer of PodSchedulingContexts.
func (f *Factory) PodSchedulingContexts() Informer[*resourcev1alpha2.PodSchedulingContext] {
	return InformerFor(f, f.c.PodSchedulingContexts(""))
}

// NodeResourceSlices is the shared informer of NodeResourceSlices.
func (f *Factory) NodeResourceSlices() Informer[*resourcev1alpha2.NodeResourceSlice] {
	return InformerFor(f, f.c.NodeResourceSlices())
}

// ResourceClaimParameters is the shared informer of ResourceClaimParameters.
func (f *Factory) ResourceClaimParameters() Informer[*resourcev1alpha2.ResourceClaimParameters] {
	return InformerFor(f, f.c.ResourceClaimParameters(""))
}

// ResourceClassParameters is the shared informer of ResourceClassParameters.
func (f *Factory) ResourceClassParameters() Informer[*resourcev1alpha2.ResourceClassParameters] {
	return InformerFor(f, f.c.ResourceClassParameters())
}

// CustomResourceDefinitions is the shared informer of CRDs.
func (f *Factory) CustomResourceDefinitions() Informer[*apiextv1.CustomResourceDefinition] {
	return InformerFor(f, f.c.CustomResourceDefinitions())
}
