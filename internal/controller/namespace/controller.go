package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/pkg/client"
)

// Defaults of Options.
const (
	DefaultResyncInterval = 5 * time.Minute
	DefaultMinRetryDelay  = 100 * time.Millisecond
	DefaultMaxRetryDelay  = 10 * time.Second
)

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// Options configure a Controller. Zero values take the defaults.
type Options struct {
	// ResyncInterval is how often every namespace being deleted is
	// examined again even without a change.
	ResyncInterval time.Duration
	// MinRetryDelay and MaxRetryDelay bound the exponential backoff of a
	// namespace whose content is still terminating, or whose sync failed.
	MinRetryDelay time.Duration
	MaxRetryDelay time.Duration
	// QueueMetrics, when set, receives the work queue's metrics
	// (controllerutil.QueueMetrics).
	QueueMetrics workqueue.MetricsProvider
	Logger       *slog.Logger
}

func (o *Options) setDefaults() {
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.MinRetryDelay <= 0 {
		o.MinRetryDelay = DefaultMinRetryDelay
	}
	if o.MaxRetryDelay < o.MinRetryDelay {
		o.MaxRetryDelay = max(DefaultMaxRetryDelay, o.MinRetryDelay)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Controller deletes the content of namespaces being deleted. Create it
// with New, start it with Run.
type Controller struct {
	opts      Options
	log       *slog.Logger
	dyn       dynamic.Interface
	meta      metadata.Interface
	discovery controllerutil.Discoverer
	informer  cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]
}

// New creates a controller that talks to the API server of cfg. When cfg
// sets no rate limits the controller uses QPS 20, burst 30.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	opts.setDefaults()
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 20, 30
	}
	cfg.UserAgent = "allot-namespace-controller"
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
	c := &Controller{
		opts: opts, log: opts.Logger, dyn: dc, meta: mc, discovery: disc,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.MinRetryDelay, opts.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace", MetricsProvider: opts.QueueMetrics}),
	}
	c.informer = controllerutil.NewInformer(controllerutil.MetadataListWatch(mc, namespacesGVR, ""), &metav1.PartialObjectMetadata{}, opts.ResyncInterval)
	if _, err := c.informer.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onChange,
		UpdateFunc: func(_, obj any) { c.onChange(obj) },
	})); err != nil {
		return nil, fmt.Errorf("watch namespaces: %w", err)
	}
	return c, nil
}

// onChange enqueues a namespace that is being deleted.
func (c *Controller) onChange(obj any) {
	m, ok := controllerutil.ObjectMeta(obj)
	if ok && m.GetDeletionTimestamp() != nil {
		c.queue.Add(m.GetName())
	}
}

// Run watches namespaces and runs workers workers until ctx ends; it
// returns nil then. A controller runs once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if workers < 1 {
		workers = 1
	}
	controllerutil.ShutDownOnDone(ctx, c.queue)
	var wg sync.WaitGroup
	wg.Go(func() { c.informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		wg.Wait()
		return nil
	}
	c.log.Info("namespace controller started", "workers", workers)
	for range workers {
		wg.Go(func() { controllerutil.RunWorker(ctx, c.queue, c.sync, c.log) })
	}
	wg.Wait()
	return nil
}
