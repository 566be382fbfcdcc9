package devicetainteviction

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/internal/controller/taineviction"
	"allot.dev/allot/pkg/client"
)

// Names as Kubernetes' DeviceTaintEviction controller uses them.
const (
	Name                               = "device-taint-eviction-controller"
	ReasonDeletionByDeviceTaintManager = "DeletionByDeviceTaintManager"
	EventReasonEviction                = "DeviceTaintManagerEviction"
	// DefaultStatusPeriod is the shortest time between two status updates
	// of one DeviceTaintRule while its eviction goes on (Kubernetes' 10 s).
	DefaultStatusPeriod = 10 * time.Second
)

var everything = labels.Everything()

// Options tune the controller.
type Options struct {
	// Limiter paces evictions, shared with node taint eviction (nil: no
	// limit).
	Limiter *taineviction.Limiter
	// StatusPeriod: DefaultStatusPeriod when zero.
	StatusPeriod time.Duration
	// Registry receives the device_taint_eviction_controller_* metrics
	// (nil: none); QueueMetrics the work queues'.
	Registry     prometheus.Registerer
	QueueMetrics workqueue.MetricsProvider
	Logger       *slog.Logger
	Now          func() time.Time
}

// Controller evicts pods using devices tainted NoExecute.
type Controller struct {
	c        *client.Client
	pods     client.Informer[*corev1.Pod]
	claimsV1 client.Informer[*resourcev1.ResourceClaim]
	claims   client.Informer[*resourcev1alpha2.ResourceClaim]
	slices   client.Informer[*resourcev1.ResourceSlice]
	rules    client.Informer[*resourcev1.DeviceTaintRule]
	podQ     workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ruleQ    workqueue.TypedRateLimitingInterface[string]
	opts     Options
	events   *client.EventRecorder
	deleted  prometheus.Counter
	latency  prometheus.Histogram

	mu sync.Mutex
	// pending is the eviction each pod awaits, by pod UID: its due time and
	// causes, kept to cancel it with an event and to count a rule's pods.
	pending map[types.UID]pendingEviction
	// evicted counts the pods each rule (by UID) evicted since the start.
	evicted map[types.UID]int64
}

type pendingEviction struct {
	pod types.NamespacedName
	due Due
}

// New creates the controller over the factory's informers; the caller
// starts the factory after New (the controller adds indexers).
func New(c *client.Client, f *client.Factory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StatusPeriod <= 0 {
		opts.StatusPeriod = DefaultStatusPeriod
	}
	limiter := func() workqueue.TypedRateLimiter[types.NamespacedName] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](200*time.Millisecond, time.Minute)
	}
	d := &Controller{c: c, pods: f.Pods(), claimsV1: f.ResourceClaimsV1(), claims: f.ResourceClaims(), slices: f.ResourceSlices(),
		rules: f.DeviceTaintRules(), opts: opts, pending: map[types.UID]pendingEviction{}, evicted: map[types.UID]int64{},
		podQ: workqueue.NewTypedRateLimitingQueueWithConfig(limiter(),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "device_taint_eviction", MetricsProvider: opts.QueueMetrics}),
		ruleQ: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "device_taint_eviction_rule_status", MetricsProvider: opts.QueueMetrics}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "device_taint_eviction_controller_pod_deletions_total",
			Help: "Total number of Pods deleted by DeviceTaintEvictionController since its start."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "device_taint_eviction_controller_pod_deletion_duration_seconds",
			Help:    "Latency, in seconds, between the time when a device taint effect has been activated and a Pod's deletion via DeviceTaintEvictionController.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240}}),
	}
	if opts.Registry != nil {
		for _, m := range []prometheus.Collector{d.deleted, d.latency} {
			if err := opts.Registry.Register(m); err != nil {
				return nil, fmt.Errorf("register device taint eviction metrics: %w", err)
			}
		}
	}
	if err := d.addIndexers(); err != nil {
		return nil, err
	}
	if err := d.addHandlers(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Controller) addIndexers() error {
	if err := d.claimsV1.AddIndexers(cache.Indexers{reservedPodIndex: reservedPodKeysV1, allocatedPoolIndex: allocatedPoolKeysV1}); err != nil {
		return fmt.Errorf("index v1 claims: %w", err)
	}
	if err := d.claims.AddIndexers(cache.Indexers{reservedPodIndex: reservedPodKeysSeed, allocatedPoolIndex: allocatedPoolKeysSeed}); err != nil {
		return fmt.Errorf("index claims: %w", err)
	}
	if err := d.slices.AddIndexers(cache.Indexers{slicePoolIndex: slicePoolKeys}); err != nil {
		return fmt.Errorf("index slices: %w", err)
	}
	return nil
}

// addHandlers decides what to look at again on each change; workers do
// the looking.
func (d *Controller) addHandlers() error {
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{d.pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    d.podChanged,
			UpdateFunc: func(_, obj any) { d.podChanged(obj) },
			DeleteFunc: d.podDeleted,
		}},
		{d.claimsV1, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.claimChanged(nil, obj) },
			UpdateFunc: d.claimChanged,
			DeleteFunc: func(obj any) { d.claimChanged(nil, tombstone(obj)) },
		}},
		{d.claims, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.claimChanged(nil, obj) },
			UpdateFunc: d.claimChanged,
			DeleteFunc: func(obj any) { d.claimChanged(nil, tombstone(obj)) },
		}},
		{d.slices, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.sliceChanged(nil, obj) },
			UpdateFunc: d.sliceChanged,
			DeleteFunc: func(obj any) { d.sliceChanged(tombstone(obj), nil) },
		}},
		{d.rules, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.ruleChanged(nil, obj) },
			UpdateFunc: d.ruleChanged,
			DeleteFunc: func(obj any) { d.ruleChanged(tombstone(obj), nil) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("add device taint eviction handler: %w", err)
		}
	}
	return nil
}

func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// podChanged queues a pod that holds claims (whichever way they were
// made: they are found by their reservedFor).
func (d *Controller) podChanged(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	d.mu.Lock()
	_, pending := d.pending[p.UID]
	d.mu.Unlock()
	if pending || d.hasClaims(p) {
		d.podQ.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
}

// podDeleted forgets a deleted pod's pending eviction.
func (d *Controller) podDeleted(obj any) {
	if p, ok := tombstone(obj).(*corev1.Pod); ok {
		d.forget(p.UID)
	}
}

// claimChanged queues the pods a claim is or was reserved for.
func (d *Controller) claimChanged(old, obj any) {
	for _, o := range []any{old, obj} {
		switch c := o.(type) {
		case *resourcev1.ResourceClaim:
			for _, p := range reservedForV1(c) {
				d.podQ.Add(p)
			}
		case *resourcev1alpha2.ResourceClaim:
			for _, p := range reservedForSeed(c) {
				d.podQ.Add(p)
			}
		}
	}
}

// sliceChanged queues the pods of claims allocated from a slice's pool
// when the NoExecute taints of its devices changed.
func (d *Controller) sliceChanged(old, obj any) {
	o, _ := old.(*resourcev1.ResourceSlice)
	n, _ := obj.(*resourcev1.ResourceSlice)
	if slices.EqualFunc(noExecuteTaints(o), noExecuteTaints(n), sameTaint) && (o == nil || n == nil || o.Spec.Pool.Generation == n.Spec.Pool.Generation) {
		return
	}
	for _, s := range []*resourcev1.ResourceSlice{o, n} {
		if s != nil {
			d.queuePool(s.Spec.Driver, s.Spec.Pool.Name)
		}
	}
}

// deviceTaint is one taint of one device of a slice.
type deviceTaint struct {
	device string
	taint  resourcev1.DeviceTaint
}

func noExecuteTaints(s *resourcev1.ResourceSlice) []deviceTaint {
	if s == nil {
		return nil
	}
	var out []deviceTaint
	for _, dev := range s.Spec.Devices {
		for _, t := range dev.Taints {
			if t.Effect == resourcev1.DeviceTaintEffectNoExecute {
				out = append(out, deviceTaint{dev.Name, t})
			}
		}
	}
	return out
}

func sameTaint(a, b deviceTaint) bool {
	return a.device == b.device && a.taint.Key == b.taint.Key && a.taint.Value == b.taint.Value &&
		a.taint.Effect == b.taint.Effect && a.taint.TimeAdded.Equal(b.taint.TimeAdded)
}

// queuePool queues the pods of every claim allocated from a pool.
func (d *Controller) queuePool(driver, pool string) {
	key := poolKey(driver, pool)
	if objs, err := d.claimsV1.GetIndexer().ByIndex(allocatedPoolIndex, key); err == nil {
		for _, o := range objs {
			d.claimChanged(nil, o)
		}
	}
	if objs, err := d.claims.GetIndexer().ByIndex(allocatedPoolIndex, key); err == nil {
		for _, o := range objs {
			d.claimChanged(nil, o)
		}
	}
}

// ruleChanged queues the pods of the claims holding devices the rule
// selects or selected, when its taint or selector changed, and the rule's
// status.
func (d *Controller) ruleChanged(old, obj any) {
	o, _ := old.(*resourcev1.DeviceTaintRule)
	n, _ := obj.(*resourcev1.DeviceTaintRule)
	if n != nil {
		d.ruleQ.Add(n.Name)
	}
	if o != nil && n != nil && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) &&
		(o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
		return // a status or metadata change
	}
	var sel []*resourcev1.DeviceTaintRule
	for _, r := range []*resourcev1.DeviceTaintRule{o, n} {
		if r != nil && r.Spec.DeviceSelector != nil {
			sel = append(sel, r)
		}
	}
	if len(sel) == 0 {
		return
	}
	v1claims, _ := d.claimsV1.Lister().List(everything)
	for _, c := range v1claims {
		if selectsAny(sel, usesV1(c)) {
			d.claimChanged(nil, c)
		}
	}
	seed, _ := d.claims.Lister().List(everything)
	for _, c := range seed {
		if selectsAny(sel, usesSeed(c)) {
			d.claimChanged(nil, c)
		}
	}
}

func selectsAny(rules []*resourcev1.DeviceTaintRule, uses []DeviceUse) bool {
	for _, u := range uses {
		for _, r := range rules {
			if useSelected(r, u) {
				return true
			}
		}
	}
	return false
}

// ruleSelects is allocator.TaintRuleSelects, also for a rule being
// deleted (its pending evictions must be re-examined).
func ruleSelects(r *resourcev1.DeviceTaintRule, driver, pool, device string) bool {
	sel := r.Spec.DeviceSelector
	return sel != nil && (sel.Driver == nil || *sel.Driver == driver) &&
		(sel.Pool == nil || *sel.Pool == pool) && (sel.Device == nil || *sel.Device == device)
}

// Run evicts until ctx ends. The factory must be started by the caller.
func (d *Controller) Run(ctx context.Context, workers int) error {
	host, _ := os.Hostname()
	d.events = client.NewEventRecorder(d.c, Name, host)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.events.Shutdown(sctx)
	}()
	defer d.podQ.ShutDown()
	defer d.ruleQ.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), d.pods.HasSynced, d.claimsV1.HasSynced, d.claims.HasSynced, d.slices.HasSynced, d.rules.HasSynced) {
		return fmt.Errorf("sync caches of the device taint eviction controller: %w", context.Cause(ctx))
	}
	controllerutil.ShutDownOnDone(ctx, d.podQ)
	controllerutil.ShutDownOnDone(ctx, d.ruleQ)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() { controllerutil.RunWorker(ctx, d.podQ, d.syncPod, d.opts.Logger) })
	}
	wg.Go(func() { controllerutil.RunWorker(ctx, d.ruleQ, d.syncRule, d.opts.Logger) })
	wg.Wait()
	return nil
}
