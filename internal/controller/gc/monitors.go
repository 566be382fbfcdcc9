package gc

import (
	"context"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/pkg/client"
)

var crdResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// monitor watches one resource and feeds the graph.
type monitor struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	// stopped silences events still in flight after stop.
	stopped atomic.Bool
}

// monitors are the running monitors, one per watched resource.
type monitors struct {
	c     *Collector
	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]*monitor
	// running counts the informer goroutines, stopped or not.
	running sync.WaitGroup
}

func newMonitors(c *Collector) *monitors {
	return &monitors{c: c, byGVR: map[schema.GroupVersionResource]*monitor{}}
}

// start watches gvr unless it is watched already. The monitor runs until
// stop, stopAll, or the end of ctx.
func (ms *monitors) start(ctx context.Context, gvr schema.GroupVersionResource) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.byGVR[gvr] != nil {
		return
	}
	c := ms.c
	inf := controllerutil.NewInformer(controllerutil.MetadataListWatch(c.meta, gvr, ""), &metav1.PartialObjectMetadata{}, c.opts.ResyncInterval)
	m := &monitor{informer: inf}
	// A relist that finds a name taken by a new object (its
	// predecessor deleted while the watch was down) is the predecessor's
	// removal: the graph is keyed by UID.
	_, err := inf.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onChange(gvr, m, obj) },
		UpdateFunc: func(_, obj any) { c.onChange(gvr, m, obj) },
		DeleteFunc: func(obj any) { c.onDelete(gvr, m, obj) },
	}))
	if err != nil {
		c.log.Error("watch resource", "resource", gvr, "err", err)
		return
	}
	mctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	ms.byGVR[gvr] = m
	ms.running.Go(func() { inf.RunWithContext(mctx) })
	c.log.Debug("watching resource", "resource", gvr)
}

// stop ends the monitor of gvr.
func (ms *monitors) stop(gvr schema.GroupVersionResource) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := ms.byGVR[gvr]; m != nil {
		m.stopped.Store(true)
		m.cancel()
		delete(ms.byGVR, gvr)
		ms.c.log.Debug("stopped watching resource", "resource", gvr)
	}
}

// stopAll stops every monitor and waits for their informers to return.
func (ms *monitors) stopAll() {
	for _, gvr := range ms.watched() {
		ms.stop(gvr)
	}
	ms.running.Wait()
}

func (ms *monitors) watched() []schema.GroupVersionResource {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(ms.byGVR))
	for gvr := range ms.byGVR {
		out = append(out, gvr)
	}
	return out
}

func (ms *monitors) count() int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return len(ms.byGVR)
}

func (ms *monitors) syncedFuncs() []cache.InformerSynced {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make([]cache.InformerSynced, 0, len(ms.byGVR))
	for _, m := range ms.byGVR {
		out = append(out, m.informer.HasSynced)
	}
	return out
}

// onChange handles an add, update or resync.
func (c *Collector) onChange(gvr schema.GroupVersionResource, m *monitor, obj any) {
	meta, ok := controllerutil.ObjectMeta(obj)
	if !ok || m.stopped.Load() {
		return
	}
	ref := objectRef{GVR: gvr, Namespace: meta.GetNamespace(), Name: meta.GetName(), UID: meta.GetUID()}
	c.enqueue(c.graph.observe(ref, meta))
	c.pokeOnCRD(gvr)
}

func (c *Collector) onDelete(gvr schema.GroupVersionResource, m *monitor, obj any) {
	meta, ok := controllerutil.ObjectMeta(obj)
	if !ok || m.stopped.Load() {
		return
	}
	c.enqueue(c.graph.remove(meta.GetUID()))
	c.pokeOnCRD(gvr)
}

// pokeOnCRD asks for a re-discovery when a CRD changes.
func (c *Collector) pokeOnCRD(gvr schema.GroupVersionResource) {
	if gvr.GroupResource() != crdResource {
		return
	}
	select {
	case c.rediscover <- struct{}{}:
	default:
	}
}
