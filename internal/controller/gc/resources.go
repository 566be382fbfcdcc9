package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"allot.dev/allot/internal/controller/controllerutil"
)

// errUnknownKind is returned for an owner reference whose kind the server
// does not serve (yet): the dependent is retried, never collected for it.
var errUnknownKind = errors.New("owner kind is not served")

// kinds maps every served kind, in every version, to its resource, so that
// owner references (which carry apiVersion and kind) can be read.
type kinds struct {
	mu     sync.RWMutex
	byKind map[schema.GroupVersionKind]controllerutil.Resource
}

func newKinds() *kinds {
	return &kinds{byKind: map[schema.GroupVersionKind]controllerutil.Resource{}}
}

// set records the discovered resources. A partial discovery only adds.
func (k *kinds) set(res []controllerutil.Resource, partial bool) {
	m := map[schema.GroupVersionKind]controllerutil.Resource{}
	k.mu.Lock()
	defer k.mu.Unlock()
	if partial {
		for gvk, r := range k.byKind {
			m[gvk] = r
		}
	}
	for _, r := range res {
		m[r.GVK()] = r
	}
	k.byKind = m
}

// lookup finds the resource of an owner reference's apiVersion and kind.
func (k *kinds) lookup(apiVersion, kind string) (controllerutil.Resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return controllerutil.Resource{}, fmt.Errorf("parse apiVersion %q: %w", apiVersion, err)
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	r, ok := k.byKind[gv.WithKind(kind)]
	if !ok {
		return controllerutil.Resource{}, fmt.Errorf("%s %s: %w", apiVersion, kind, errUnknownKind)
	}
	return r, nil
}

// syncResources re-discovers the served resources, watches the new ones
// and, after a complete discovery, stops watching the ones that are gone.
func (c *Collector) syncResources(ctx context.Context) error {
	res, err := controllerutil.Discover(ctx, c.discovery)
	partial := errors.Is(err, controllerutil.ErrPartialDiscovery)
	if err != nil && !partial {
		return err
	}
	c.kinds.set(res, partial)
	want := map[schema.GroupVersionResource]bool{}
	for _, r := range controllerutil.PreferredVersions(res) {
		if r.Supports("list", "watch", "delete") && !slices.Contains(c.opts.IgnoredResources, r.GVR.GroupResource()) {
			want[r.GVR] = true
		}
	}
	for gvr := range want {
		c.monitors.start(ctx, gvr)
	}
	if !partial {
		for _, gvr := range c.monitors.watched() {
			if !want[gvr] {
				c.monitors.stop(gvr)
				c.enqueue(c.graph.removeResource(gvr))
			}
		}
	}
	return err
}
