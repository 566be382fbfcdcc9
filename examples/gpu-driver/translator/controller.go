package translator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
)

// Component is the source.component of the translator's events.
const Component = "gpu.example.com-translator"

// Event reasons, on the GpuClaimParameters.
const (
	// ReasonTranslated (Normal): the ResourceClaimParameters was created
	// or updated.
	ReasonTranslated = "Translated"
	// ReasonInvalidParameters (Warning): the spec is invalid; the message
	// names the field.
	ReasonInvalidParameters = "InvalidParameters"
	// ReasonTranslationConflict (Warning): a ResourceClaimParameters of the
	// same name exists that was not generated from this object.
	ReasonTranslationConflict = "TranslationConflict"
)

// Config is how Run runs. Client is required; zero values of the other
// fields take the defaults.
type Config struct {
	// Client talks to the API server, typically with a driver token for
	// gpu.example.com.
	Client *client.Client
	// Namespace restricts the translator to one namespace ("" for all).
	Namespace string
	// Workers is how many objects are translated at once (default 2).
	Workers int
	// Resync is how often every GpuClaimParameters is checked again, which
	// repairs translations changed behind the translator's back (default
	// 10m).
	Resync time.Duration
	// MinRetryDelay and MaxRetryDelay bound the exponential backoff after
	// a failed write (defaults 100ms and 1m).
	MinRetryDelay time.Duration
	MaxRetryDelay time.Duration
	// APITimeout bounds every API call (default 30s).
	APITimeout time.Duration
	// CRDPollInterval is how often Run checks, before it starts, whether
	// the GpuClaimParameters CRD is installed yet (default 2s).
	CRDPollInterval time.Duration
	// CRDWarnAfter is how long the CRD may be missing before that is
	// logged as a warning (default 30s); until then it is normal (it is
	// being installed) and logged at info level.
	CRDWarnAfter time.Duration
	// EventFlushTimeout bounds how long Run writes queued events when it
	// stops (default 5s).
	EventFlushTimeout time.Duration
	// Host is the source.host of events (default: the host name).
	Host string
	// Logger receives the log (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Resync == 0 {
		c.Resync = 10 * time.Minute
	}
	if c.MinRetryDelay == 0 {
		c.MinRetryDelay = 100 * time.Millisecond
	}
	if c.MaxRetryDelay == 0 {
		c.MaxRetryDelay = time.Minute
	}
	if c.APITimeout == 0 {
		c.APITimeout = 30 * time.Second
	}
	if c.CRDPollInterval == 0 {
		c.CRDPollInterval = 2 * time.Second
	}
	if c.CRDWarnAfter == 0 {
		c.CRDWarnAfter = 30 * time.Second
	}
	if c.EventFlushTimeout == 0 {
		c.EventFlushTimeout = 5 * time.Second
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname() // only a label on events
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	if c.Client == nil {
		return errors.New("translator config: client is required")
	}
	if c.Workers < 0 {
		return fmt.Errorf("translator config: workers: must not be negative, got %d", c.Workers)
	}
	for name, d := range map[string]time.Duration{
		"resync": c.Resync, "min retry delay": c.MinRetryDelay, "max retry delay": c.MaxRetryDelay,
		"API timeout": c.APITimeout, "CRD poll interval": c.CRDPollInterval, "CRD warn after": c.CRDWarnAfter, "event flush timeout": c.EventFlushTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("translator config: %s: must not be negative, got %s", name, d)
		}
	}
	if c.MinRetryDelay > c.MaxRetryDelay {
		return fmt.Errorf("translator config: min retry delay %s exceeds max retry delay %s", c.MinRetryDelay, c.MaxRetryDelay)
	}
	return nil
}

// translator is one running controller.
type translator struct {
	cfg    Config
	log    *slog.Logger
	vendor cache.SharedIndexInformer // GpuClaimParameters, unstructured
	params cache.SharedIndexInformer // ResourceClaimParameters
	plist  client.Lister[*resourceapi.ResourceClaimParameters]
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	events *client.EventRecorder
}

// Run translates GpuClaimParameters until ctx ends, then returns nil. It
// waits for the GpuClaimParameters CRD first, logging that it waits.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	if err := waitForResource(ctx, &cfg, GroupVersionResource); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	c := cfg.Client
	params := c.ResourceClaimParameters(cfg.Namespace)
	t := &translator{
		cfg: cfg, log: log,
		vendor: cache.NewSharedIndexInformerWithOptions(vendorListWatch(c, cfg.Namespace), &unstructured.Unstructured{},
			cache.SharedIndexInformerOptions{ResyncPeriod: cfg.Resync, ObjectDescription: Resource}),
		params: client.NewInformer(params, 0, nil),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](cfg.MinRetryDelay, cfg.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "gpu-translator"}),
		events: client.NewEventRecorder(c, Component, cfg.Host),
	}
	t.plist = client.NewLister[*resourceapi.ResourceClaimParameters](t.params.GetIndexer(), params.GroupVersionResource().GroupResource())
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), cfg.EventFlushTimeout)
		defer cancel()
		t.events.Shutdown(flush)
	}()
	if err := t.addHandlers(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, inf := range []cache.SharedIndexInformer{t.vendor, t.params} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.RunWithContext(ctx)
		}()
	}
	if !cache.WaitForCacheSync(ctx.Done(), t.vendor.HasSynced, t.params.HasSynced) {
		t.queue.ShutDown()
		return nil // ctx ended
	}
	log.Info("translating GpuClaimParameters", "namespace", cfg.Namespace, "workers", cfg.Workers)
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	t.queue.ShutDown()
	return nil
}

// vendorListWatch lists and watches GpuClaimParameters as unstructured
// objects through the dynamic client.
func vendorListWatch(c *client.Client, ns string) cache.ListerWatcher {
	r := c.Dynamic().Resource(GroupVersionResource).Namespace(ns)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, o)
		},
	}
}

// waitForResource returns once gvr can be listed. While the resource is
// unknown (its CRD is not installed) or the server cannot be reached it
// polls, logging each new problem once: at info level at first (a CRD
// applied beside the driver takes a moment), as a warning once it has
// lasted CRDWarnAfter. Rejected credentials are an error.
func waitForResource(ctx context.Context, cfg *Config, gvr schema.GroupVersionResource) error {
	r := cfg.Client.Dynamic().Resource(gvr).Namespace(cfg.Namespace)
	var last string
	start, warned := time.Now(), false
	for {
		lctx, cancel := context.WithTimeout(ctx, cfg.APITimeout)
		_, err := r.List(lctx, metav1.ListOptions{Limit: 1})
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
		}
		resource := gvr.GroupResource().String()
		switch late := time.Since(start) >= cfg.CRDWarnAfter; {
		case late && !warned && apierrors.IsNotFound(err):
			warned = true
			cfg.Logger.Warn("resource still not served: is its CustomResourceDefinition installed? waiting",
				"resource", resource, "after", time.Since(start).Round(time.Second))
		case late && !warned:
			warned = true
			cfg.Logger.Warn("still cannot list; retrying", "resource", resource, "err", err)
		case err.Error() != last && !warned:
			if apierrors.IsNotFound(err) {
				cfg.Logger.Info("resource not served yet (its CustomResourceDefinition is not installed yet); waiting", "resource", resource)
			} else {
				cfg.Logger.Info("cannot list yet; retrying", "resource", resource, "err", err)
			}
		}
		last = err.Error()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.CRDPollInterval):
		}
	}
}

func (t *translator) addHandlers() error {
	if _, err := t.vendor.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.enqueue,
		UpdateFunc: func(_, obj any) { t.enqueue(obj) },
		// Deletion: the garbage collector deletes the translation through
		// its owner reference.
	}); err != nil {
		return fmt.Errorf("watch %s: %w", Resource, err)
	}
	if _, err := t.params.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.onParams,
		UpdateFunc: func(_, obj any) { t.onParams(obj) },
		DeleteFunc: t.onParams,
	}); err != nil {
		return fmt.Errorf("watch resourceclaimparameters: %w", err)
	}
	return nil
}

func (t *translator) enqueue(obj any) {
	if m, ok := objectMeta(obj); ok {
		t.queue.Add(cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// onParams enqueues the GpuClaimParameters of the same name as a
// ResourceClaimParameters that changed or went away, if there is one: its
// translation may need repair, or a conflicting object made room.
func (t *translator) onParams(obj any) {
	m, ok := objectMeta(obj)
	if !ok {
		return
	}
	key := cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}
	if _, exists, _ := t.vendor.GetIndexer().GetByKey(key.String()); exists {
		t.queue.Add(key)
	}
}

// objectMeta returns the metadata of an informer event's object, looking
// through the tombstone a delete event may carry.
func objectMeta(obj any) (metav1.Object, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(metav1.Object)
	return m, ok
}

// processNext syncs one key; false once the queue is shut down.
func (t *translator) processNext(ctx context.Context) bool {
	key, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(key)
	if err := t.sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return true
		}
		t.log.Info("translation failed, will retry", "key", key.String(), "retries", t.queue.NumRequeues(key), "err", err)
		t.queue.AddRateLimited(key)
		return true
	}
	t.queue.Forget(key)
	return true
}
