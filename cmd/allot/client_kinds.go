package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"allot.dev/allot/pkg/client"
)

// kindMapper resolves what a user types (plural, singular, Kind, short
// name, KIND.GROUP, RESOURCE.VERSION.GROUP) and manifests' apiVersion and
// kind to REST mappings, through discovery cached in memory. A miss resets
// the cache and tries once more, so a kind whose CRD was applied a moment
// ago is found.
type kindMapper struct {
	mapper   meta.RESTMapperWithContext
	deferred *restmapper.DeferredDiscoveryRESTMapper
}

func newKindMapper(c *client.Client) *kindMapper {
	cached := memory.NewMemCacheClientWithContext(c.Discovery())
	deferred := restmapper.NewDeferredDiscoveryRESTMapperWithContext(cached)
	expander := restmapper.NewShortcutExpanderWithContext(deferred, cached, func(string) {})
	return &kindMapper{mapper: expander, deferred: deferred}
}

// reset forgets what discovery said.
func (k *kindMapper) reset(ctx context.Context) { k.deferred.ResetWithContext(ctx) }

// resolve maps a user-typed kind.
func (k *kindMapper) resolve(ctx context.Context, arg string) (*meta.RESTMapping, error) {
	m, err := k.resolveOnce(ctx, arg)
	if meta.IsNoMatchError(err) {
		k.reset(ctx)
		m, err = k.resolveOnce(ctx, arg)
	}
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("the server doesn't have a resource type %q", arg)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve kind %q: %w", arg, err)
	}
	return m, nil
}

// resolveOnce follows kubectl: first as a resource (with an optional
// version and group), then as a Kind.
func (k *kindMapper) resolveOnce(ctx context.Context, arg string) (*meta.RESTMapping, error) {
	fullGVR, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if fullGVR != nil {
		gvk, _ = k.mapper.KindForWithContext(ctx, *fullGVR)
	}
	if gvk.Empty() {
		gvk, _ = k.mapper.KindForWithContext(ctx, gr.WithVersion(""))
	}
	if !gvk.Empty() {
		return k.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	}
	fullGVK, gk := schema.ParseKindArg(arg)
	if fullGVK != nil {
		if m, err := k.mapper.RESTMappingWithContext(ctx, fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return m, nil
		}
	}
	return k.mapper.RESTMappingWithContext(ctx, gk)
}

// forKind maps a manifest's apiVersion and kind.
func (k *kindMapper) forKind(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := k.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		k.reset(ctx)
		m, err = k.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	}
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("no kind %q is served in version %q; is its CRD applied?", gvk.Kind, gvk.GroupVersion())
	}
	if err != nil {
		return nil, fmt.Errorf("resolve kind %s: %w", gvk, err)
	}
	return m, nil
}

// waitServed polls discovery until gvk is served or timeout passes.
func (k *kindMapper) waitServed(ctx context.Context, gvk schema.GroupVersionKind, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		k.reset(ctx)
		_, err := k.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be served: %w", gvk, err)
		case <-tick.C:
		}
	}
}
