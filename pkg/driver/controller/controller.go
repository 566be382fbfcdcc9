package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/driver/internal/keylock"
)

// Controller is one running driver controller; see the package
// documentation for what it does.
type Controller struct {
	cfg     Config
	names   names
	driver  Driver
	log     *slog.Logger
	factory *client.Factory
	ownsF   bool // the factory is ours: Run shuts it down

	claims   client.Informer[*resourcev1alpha2.ResourceClaim]
	classes  client.Informer[*resourcev1alpha2.ResourceClass]
	contexts client.Informer[*resourcev1alpha2.PodSchedulingContext]
	pods     client.Informer[*corev1.Pod]
	handlers []handlerRegistration

	queue workqueue.TypedRateLimitingInterface[item]
	locks keylock.Locks
	ran   atomic.Bool
}

// item is a unit of work: one claim or one scheduling context.
type item struct {
	kind      itemKind
	namespace string
	name      string
}

type itemKind int

const (
	claimItem itemKind = iota
	contextItem
)

func (i item) String() string {
	if i.kind == claimItem {
		return "resourceclaim " + i.namespace + "/" + i.name
	}
	return "podschedulingcontext " + i.namespace + "/" + i.name
}

type handlerRegistration struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// New builds a controller for driver d and registers its informers with
// the factory (Config.Factory, or its own). Call Run once.
func New(cfg Config, d Driver) (*Controller, error) {
	cfg, err := cfg.complete()
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("driver controller: driver is nil")
	}
	c := &Controller{
		cfg: cfg, names: namesOf(cfg), driver: d, factory: cfg.Factory,
		log: cfg.Logger.With("controller", cfg.ControllerName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[item](cfg.MinRetryDelay, cfg.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[item]{Name: cfg.ControllerName}),
	}
	if c.factory == nil {
		var opts []client.FactoryOption
		if cfg.Namespace != "" {
			opts = append(opts, client.WithNamespace(cfg.Namespace))
		}
		c.factory, c.ownsF = client.NewFactory(cfg.Client, cfg.Resync, opts...), true
	}
	c.claims = c.factory.ResourceClaims()
	c.classes = c.factory.ResourceClasses()
	c.contexts = c.factory.PodSchedulingContexts()
	c.pods = c.factory.Pods()
	if err := c.addHandlers(); err != nil {
		c.removeHandlers()
		return nil, err
	}
	return c, nil
}

// Run handles claims and scheduling contexts until ctx ends, then
// returns nil. It starts the factory's informers, waits for their caches,
// and returns an error only when it cannot start.
func (c *Controller) Run(ctx context.Context) error {
	if !c.ran.CompareAndSwap(false, true) {
		return errors.New("driver controller: Run called twice")
	}
	defer c.removeHandlers()
	events := client.NewEventRecorder(c.cfg.Client, c.cfg.ControllerName, c.cfg.Host)
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), c.cfg.EventFlushTimeout)
		defer cancel()
		events.Shutdown(flush)
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()
	c.factory.Start(ctx)
	if c.ownsF {
		defer c.factory.Shutdown()
	}
	if err := c.factory.WaitForCacheSync(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("driver controller %s: %w", c.cfg.ControllerName, err)
	}
	c.log.Info("driver controller running", "driver", c.cfg.DriverName, "namespace", c.cfg.Namespace, "workers", c.cfg.Workers)
	w := &worker{Controller: c, events: events}
	for range c.cfg.Workers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.log.Info("driver controller stopping")
	return nil
}

// worker is the per-Run state the sync functions use.
type worker struct {
	*Controller
	events *client.EventRecorder
}

// processNext handles one item; false once the queue is shut down.
func (w *worker) processNext(ctx context.Context) bool {
	it, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(it)
	var err error
	if it.kind == claimItem {
		err = w.syncClaim(ctx, it.namespace, it.name)
	} else {
		err = w.syncContext(ctx, it.namespace, it.name)
	}
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		w.log.Info("handling failed, will retry", "item", it.String(), "retries", w.queue.NumRequeues(it), "err", err)
		w.queue.AddRateLimited(it)
		return true
	}
	w.queue.Forget(it)
	return true
}

func (c *Controller) addHandlers() error {
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  cache.ResourceEventHandlerFuncs
	}{
		{c.claims, client.SplitReplacements(cache.ResourceEventHandlerFuncs{AddFunc: c.onClaim, UpdateFunc: func(_, obj any) { c.onClaim(obj) }, DeleteFunc: c.onClaim})},
		{c.classes, cache.ResourceEventHandlerFuncs{AddFunc: c.onClass, UpdateFunc: func(_, obj any) { c.onClass(obj) }}},
		{c.contexts, cache.ResourceEventHandlerFuncs{AddFunc: c.onContext, UpdateFunc: func(_, obj any) { c.onContext(obj) }}},
		{c.pods, client.SplitReplacements(cache.ResourceEventHandlerFuncs{AddFunc: c.onPod, UpdateFunc: func(_, obj any) { c.onPod(obj) }})},
	} {
		reg, err := h.inf.AddEventHandler(h.fn)
		if err != nil {
			return fmt.Errorf("driver controller: add event handler: %w", err)
		}
		c.handlers = append(c.handlers, handlerRegistration{informer: h.inf, reg: reg})
	}
	return nil
}

// removeHandlers detaches the controller from a factory that may outlive
// it.
func (c *Controller) removeHandlers() {
	for _, h := range c.handlers {
		_ = h.informer.RemoveEventHandler(h.reg) // fails only for an unknown registration
	}
	c.handlers = nil
}

// objectMeta returns the metadata of an informer event's object, looking
// through the tombstone a delete event may carry.
func objectMeta(obj any) (metav1.Object, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	return m, err == nil
}

// onClaim queues the claim, and when it is ours every scheduling context:
// a new or changed allocation changes where other claims fit, and a claim
// created from a template completes its pod.
func (c *Controller) onClaim(obj any) {
	m, ok := objectMeta(obj)
	if !ok {
		return
	}
	c.queue.Add(item{kind: claimItem, namespace: m.GetNamespace(), name: m.GetName()})
	claim, ok := m.(*resourcev1alpha2.ResourceClaim)
	if !ok {
		return
	}
	if c.names.classIsOurs(c.class(claim.Spec.ResourceClassName)) || c.names.allocatedByUs(claim) {
		c.queueContexts()
	}
}

// onClass queues the class's claims: they may have become ours.
func (c *Controller) onClass(obj any) {
	class, ok := obj.(*resourcev1alpha2.ResourceClass)
	if !ok || !c.names.classIsOurs(class) {
		return
	}
	for _, o := range c.claims.GetStore().List() {
		if claim, ok := o.(*resourcev1alpha2.ResourceClaim); ok && claim.Spec.ResourceClassName == class.Name {
			c.queue.Add(item{kind: claimItem, namespace: claim.Namespace, name: claim.Name})
		}
	}
	c.queueContexts()
}

func (c *Controller) onContext(obj any) {
	if m, ok := objectMeta(obj); ok {
		c.queue.Add(item{kind: contextItem, namespace: m.GetNamespace(), name: m.GetName()})
	}
}

// onPod queues the pod's scheduling context, if it has one: a pod seen
// late, or one whose generated claims were recorded.
func (c *Controller) onPod(obj any) {
	m, ok := objectMeta(obj)
	if !ok {
		return
	}
	key := cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}.String()
	if _, exists, _ := c.contexts.GetIndexer().GetByKey(key); exists {
		c.queue.Add(item{kind: contextItem, namespace: m.GetNamespace(), name: m.GetName()})
	}
}

func (c *Controller) queueContexts() {
	for _, key := range c.contexts.GetStore().ListKeys() {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err == nil {
			c.queue.Add(item{kind: contextItem, namespace: ns, name: name})
		}
	}
}

// apiContext bounds one API call.
func (c *Controller) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.APITimeout)
}

// driverContext bounds one call into the driver.
func (c *Controller) driverContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.DriverTimeout)
}
