package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"allot.dev/allot/internal/controller/controllerutil"
)

// Defaults of Options.
const (
	DefaultResyncInterval      = 10 * time.Minute
	DefaultRediscoveryInterval = 30 * time.Second
	DefaultCacheSyncTimeout    = 30 * time.Second
)

// DefaultIgnoredResources are not watched: events are many, short-lived
// and never owners.
var DefaultIgnoredResources = []schema.GroupResource{
	{Group: "", Resource: "events"},
	{Group: "events.k8s.io", Resource: "events"},
}

// Options configure a Collector. Zero values take the defaults.
type Options struct {
	// ResyncInterval is how often every watched object is re-examined.
	ResyncInterval time.Duration
	// RediscoveryInterval is how often the served resources are
	// re-discovered (they are also re-discovered when a CRD changes).
	RediscoveryInterval time.Duration
	// CacheSyncTimeout bounds the wait for the first list of every
	// resource before the workers start anyway.
	CacheSyncTimeout time.Duration
	// IgnoredResources are never watched (nil: DefaultIgnoredResources).
	IgnoredResources []schema.GroupResource
	// QueueMetrics, when set, receives the work queues' metrics
	// (controllerutil.QueueMetrics).
	QueueMetrics workqueue.MetricsProvider
	Logger       *slog.Logger
}

func (o *Options) setDefaults() {
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.RediscoveryInterval <= 0 {
		o.RediscoveryInterval = DefaultRediscoveryInterval
	}
	if o.CacheSyncTimeout <= 0 {
		o.CacheSyncTimeout = DefaultCacheSyncTimeout
	}
	if o.IgnoredResources == nil {
		o.IgnoredResources = DefaultIgnoredResources
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Collector is the garbage collector. Create it with New, start it with Run.
type Collector struct {
	opts      Options
	log       *slog.Logger
	meta      metadata.Interface
	dyn       dynamic.Interface
	discovery controllerutil.Discoverer

	graph    *graph
	kinds    *kinds
	monitors *monitors
	// check holds objects to judge against their owners, and owners in
	// foreground deletion; orphan holds owners whose dependents are to be
	// orphaned.
	check  workqueue.TypedRateLimitingInterface[objectRef]
	orphan workqueue.TypedRateLimitingInterface[objectRef]
	// rediscover is poked when a CRD changes.
	rediscover chan struct{}
}

// New creates a collector that talks to the API server of cfg. When cfg
// sets no rate limits the collector uses QPS 20, burst 30.
func New(cfg *rest.Config, opts Options) (*Collector, error) {
	opts.setDefaults()
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 20, 30
	}
	cfg.UserAgent = "allot-garbage-collector"
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create metadata client: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create discovery client: %w", err)
	}
	c := &Collector{
		opts: opts, log: opts.Logger, meta: mc, dyn: dc, discovery: disc,
		graph: newGraph(), kinds: newKinds(),
		check: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[objectRef](),
			workqueue.TypedRateLimitingQueueConfig[objectRef]{Name: "gc_check", MetricsProvider: opts.QueueMetrics}),
		orphan: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[objectRef](),
			workqueue.TypedRateLimitingQueueConfig[objectRef]{Name: "gc_orphan", MetricsProvider: opts.QueueMetrics}),
		rediscover: make(chan struct{}, 1),
	}
	c.monitors = newMonitors(c)
	return c, nil
}

// Run discovers the resources, watches them, and runs workers workers per
// queue until ctx ends. It returns nil when ctx ends. A collector runs once.
func (c *Collector) Run(ctx context.Context, workers int) error {
	if workers < 1 {
		workers = 1
	}
	controllerutil.ShutDownOnDone(ctx, c.check)
	controllerutil.ShutDownOnDone(ctx, c.orphan)
	defer c.monitors.stopAll()
	c.firstDiscovery(ctx)
	if ctx.Err() != nil {
		return nil
	}
	c.waitForSync(ctx)
	c.log.Info("garbage collector started", "resources", c.monitors.count(), "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { controllerutil.RunWorker(ctx, c.check, c.syncCheck, c.log) })
		wg.Go(func() { controllerutil.RunWorker(ctx, c.orphan, c.syncOrphan, c.log) })
	}
	c.rediscoverLoop(ctx)
	wg.Wait()
	return nil
}

// firstDiscovery retries until the resources are known or ctx ends.
func (c *Collector) firstDiscovery(ctx context.Context) {
	for {
		err := c.syncResources(ctx)
		if err == nil {
			return
		}
		c.log.Warn("discover resources", "err", err)
		if errors.Is(err, controllerutil.ErrPartialDiscovery) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// waitForSync waits for the first list of every watched resource, at
// most CacheSyncTimeout: decisions rest on live reads, so a resource that
// cannot be listed must not stop the collector.
func (c *Collector) waitForSync(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, c.opts.CacheSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), c.monitors.syncedFuncs()...) && ctx.Err() == nil {
		c.log.Warn("not every resource was listed in time; starting anyway", "timeout", c.opts.CacheSyncTimeout)
	}
}

func (c *Collector) rediscoverLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.RediscoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.rediscover:
		}
		if err := c.syncResources(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("re-discover resources", "err", err)
		}
	}
}

// enqueue hands work from the graph to the queues.
func (c *Collector) enqueue(w work) {
	for _, r := range w.check {
		c.check.Add(r)
	}
	for _, r := range w.orphan {
		c.orphan.Add(r)
	}
}
