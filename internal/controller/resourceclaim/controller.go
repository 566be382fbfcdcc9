package resourceclaim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/pkg/client"
)

// Options tune the controller. Zero values take the defaults.
type Options struct {
	// ResyncInterval is how often every pod and claim that still needs
	// work is enqueued again (default 30s).
	ResyncInterval time.Duration
	// MinRetryDelay and MaxRetryDelay bound the exponential backoff of a
	// failed sync (defaults 50ms and 1m).
	MinRetryDelay time.Duration
	MaxRetryDelay time.Duration
	// APITimeout bounds every API call (default 30s).
	APITimeout time.Duration
	// FenceMargin is added to a node's recorded fence time before the
	// fencing rule trusts that the node stopped the pods holding devices
	// other nodes can reach (default fence.DefaultMargin, 5s;
	// --fence-margin). Negative is refused by New.
	FenceMargin time.Duration
	// Now returns the current time (tests; default time.Now).
	Now func() time.Time
	// Registry receives the controller's metrics (default: a new one, see
	// Controller.Registry).
	Registry *prometheus.Registry
	// QueueMetrics, when set, receives the work queue's metrics
	// (controllerutil.QueueMetrics), as queue "resource_claim".
	QueueMetrics workqueue.MetricsProvider
	Logger       *slog.Logger
}

func (o *Options) defaults() {
	if o.ResyncInterval == 0 {
		o.ResyncInterval = 30 * time.Second
	}
	if o.MinRetryDelay == 0 {
		o.MinRetryDelay = 50 * time.Millisecond
	}
	if o.MaxRetryDelay == 0 {
		o.MaxRetryDelay = time.Minute
	}
	if o.APITimeout == 0 {
		o.APITimeout = 30 * time.Second
	}
	if o.FenceMargin == 0 {
		o.FenceMargin = fence.DefaultMargin
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// reservedPodIndex indexes claims by the "namespace/uid" of the pods in
// their reservedFor.
const reservedPodIndex = "resourceclaim-controller-reserved-pod"

// ownerPodIndex indexes claims by the "namespace/uid" of the pod that
// controls them (claims created from a pod's template).
const ownerPodIndex = "resourceclaim-controller-owner-pod"

// DefaultWorkers is how many claims and pods the controller syncs at once
// in the controller manager. A pod's sync is two sequential writes (the
// claim, then the pod's status), each waiting on etcd's fsync; with 8
// workers the controller, not the scheduler, held the backlog of
// BenchmarkDRA (bench/README.md), and etcd batches concurrent writes into
// one fsync, so many workers cost goroutines, not disk.
const DefaultWorkers = 32

type objKind int

const (
	kindPod objKind = iota
	kindClaim
	// kindClaimV1 is a claim stored as resource.k8s.io/v1.
	kindClaimV1
)

// key names one pod or claim to sync.
type key struct {
	kind      objKind
	namespace string
	name      string
}

// Controller creates claims from templates and releases unused claims.
type Controller struct {
	c        *client.Client
	pods     client.Informer[*corev1.Pod]
	claims   client.Informer[*resourcev1alpha2.ResourceClaim]
	tmpls    client.Informer[*resourcev1alpha2.ResourceClaimTemplate]
	claimsV1 client.Informer[*resourcev1.ResourceClaim]
	tmplsV1  client.Informer[*resourcev1.ResourceClaimTemplate]
	classes  client.Informer[*resourcev1alpha2.ResourceClass]
	contexts client.Informer[*resourcev1alpha2.PodSchedulingContext]
	nodes    client.Informer[*corev1.Node]
	leases   client.Informer[*coordinationv1.Lease]
	queue    workqueue.TypedRateLimitingInterface[key]
	events   *client.EventRecorder
	opts     Options
	log      *slog.Logger

	created        prometheus.Counter
	createFailures prometheus.Counter
	// fencedReleases counts reservations the fencing rule released, by
	// the devices the claim holds (devicesNodeLocal, devicesMultiNode).
	fencedReleases *prometheus.CounterVec

	// expected remembers claims created but perhaps not yet in the cache,
	// by pod UID and entry name, so a retry never creates a second one.
	mu       sync.Mutex
	expected map[types.UID]map[string]string
	// written is the resourceVersion of the controller's last write of a
	// claim, by UID, until the cache shows that version.
	written map[types.UID]uint64
	// podNodes remembers the node of pods with claims (rememberNode),
	// waitNoted the node a gone pod's reservation was last said to wait
	// for, by "claim UID/pod UID" (noteWait).
	podNodes  map[types.UID]podPlace
	waitNoted map[string]string
	// goneNodes are deleted nodes' fence times and last heartbeats
	// (rememberGoneNode); startedAt is when the controller was created,
	// the latest heartbeat a node deleted before then can have had.
	goneNodes map[string]goneNode
	startedAt time.Time
}

// New creates a controller over the factory's pod, claim and claim
// template (of both resource.k8s.io versions), class and
// PodSchedulingContext informers. Call it before the factory is started.
func New(c *client.Client, f *client.Factory, opts Options) (*Controller, error) {
	if opts.FenceMargin < 0 {
		return nil, fmt.Errorf("fence margin %v: must not be negative", opts.FenceMargin)
	}
	opts.defaults()
	ctrl := &Controller{
		c: c, pods: f.Pods(), claims: f.ResourceClaims(), tmpls: f.ResourceClaimTemplates(), classes: f.ResourceClasses(), contexts: f.PodSchedulingContexts(),
		claimsV1: f.ResourceClaimsV1(), tmplsV1: f.ResourceClaimTemplatesV1(), nodes: f.Nodes(), leases: f.NodeLeases(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](opts.MinRetryDelay, opts.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "resource_claim", MetricsProvider: opts.QueueMetrics}),
		opts: opts, log: opts.Logger,
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "resource_controller_create_total", Help: "ResourceClaims the controller tried to create from templates.",
		}),
		createFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "resource_controller_create_failures_total", Help: "ResourceClaim creations from templates that failed.",
		}),
		fencedReleases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "resource_controller_fenced_releases_total",
			Help: "Reservations of pods on unreachable, out-of-service or deleted nodes that the fencing rule released (event FencedRelease), by the devices the claim holds: node_local, or multi_node once the node's fence time plus the margin had passed.",
		}, []string{"devices"}),
		expected: map[types.UID]map[string]string{}, written: map[types.UID]uint64{},
		podNodes: map[types.UID]podPlace{}, waitNoted: map[string]string{},
		goneNodes: map[string]goneNode{}, startedAt: opts.Now(),
	}
	for _, m := range []prometheus.Collector{ctrl.created, ctrl.createFailures, ctrl.fencedReleases} {
		if err := opts.Registry.Register(m); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	claimIndexers := cache.Indexers{reservedPodIndex: reservedPodKeys, ownerPodIndex: ownerPodKeys}
	if err := ctrl.claims.AddIndexers(claimIndexers); err != nil {
		return nil, fmt.Errorf("index claims by pod: %w", err)
	}
	if err := ctrl.claimsV1.AddIndexers(claimIndexers); err != nil {
		return nil, fmt.Errorf("index %s claims by pod: %w", versionV1, err)
	}
	if err := ctrl.addHandlers(); err != nil {
		return nil, err
	}
	if err := ctrl.addNodeHandlers(); err != nil {
		return nil, err
	}
	return ctrl, nil
}

// Registry holds the controller's metrics.
func (c *Controller) Registry() *prometheus.Registry { return c.opts.Registry }

func reservedPodKeys(obj any) ([]string, error) {
	var ns string
	var refs []resourcev1alpha2.ResourceClaimConsumerReference
	switch claim := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		ns, refs = claim.Namespace, claim.Status.ReservedFor
	case *resourcev1.ResourceClaim:
		ns, refs = claim.Namespace, consumersV1(claim.Status.ReservedFor)
	default:
		return nil, nil
	}
	var out []string
	for _, r := range refs {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, ns+"/"+string(r.UID))
		}
	}
	return out, nil
}

func ownerPodKeys(obj any) ([]string, error) {
	var claim metav1.Object
	switch cl := obj.(type) {
	case *resourcev1alpha2.ResourceClaim:
		claim = cl
	case *resourcev1.ResourceClaim:
		claim = cl
	default:
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(claim); ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" {
		return []string{claim.GetNamespace() + "/" + string(ref.UID)}, nil
	}
	return nil, nil
}

func (c *Controller) addHandlers() error {
	if _, err := c.pods.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onPod,
		UpdateFunc: func(_, obj any) { c.onPod(obj) },
		DeleteFunc: c.onPodDelete,
	})); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	if _, err := c.claims.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onClaim,
		UpdateFunc: func(_, obj any) { c.onClaim(obj) },
		DeleteFunc: c.onClaimDelete,
	})); err != nil {
		return fmt.Errorf("watch claims: %w", err)
	}
	if _, err := c.claimsV1.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onClaimV1,
		UpdateFunc: func(_, obj any) { c.onClaimV1(obj) },
		DeleteFunc: c.onClaimDelete,
	})); err != nil {
		return fmt.Errorf("watch %s claims: %w", versionV1, err)
	}
	return nil
}

// onPod enqueues a pod that needs claims or a PodSchedulingContext, and
// the claims reserved for it once it has released them.
func (c *Controller) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.rememberNode(pod)
	if len(ClaimsToCreate(pod)) > 0 || c.needsContext(pod) {
		c.queue.Add(key{kindPod, pod.Namespace, pod.Name})
	}
	if (podTerminal(pod) && podConditionTrue(pod, corev1.PodResourceClaimsUnprepared)) ||
		(pod.DeletionTimestamp != nil && len(pod.Spec.ResourceClaims) > 0) {
		// Released, or being deleted: the fencing rule may release it if
		// its node is unreachable.
		c.enqueueReservedClaims(pod.Namespace, pod.UID)
	}
}

func (c *Controller) onPodDelete(obj any) {
	m, ok := controllerutil.ObjectMeta(obj)
	if !ok {
		return
	}
	if pod, ok := m.(*corev1.Pod); ok {
		c.rememberNode(pod)
		if _, tombstone := obj.(cache.DeletedFinalStateUnknown); !tombstone {
			c.rememberNeverBound(pod)
		}
	}
	c.mu.Lock()
	delete(c.expected, m.GetUID())
	c.mu.Unlock()
	c.enqueueReservedClaims(m.GetNamespace(), m.GetUID())
}

func (c *Controller) enqueueReservedClaims(ns string, uid types.UID) {
	claims, err := c.claims.Lister().ByIndex(reservedPodIndex, ns+"/"+string(uid))
	if err != nil {
		c.log.Error("find claims reserved for pod", "namespace", ns, "uid", uid, "err", err)
		return
	}
	for _, cl := range claims {
		c.queue.Add(key{kindClaim, cl.Namespace, cl.Name})
	}
	claimsV1, err := c.claimsV1.Lister().ByIndex(reservedPodIndex, ns+"/"+string(uid))
	if err != nil {
		c.log.Error("find claims reserved for pod", "namespace", ns, "uid", uid, "version", versionV1, "err", err)
		return
	}
	for _, cl := range claimsV1 {
		c.queue.Add(key{kindClaimV1, cl.Namespace, cl.Name})
	}
}

// claimNeedsWork is the cheap check of the event handlers: the claim has
// pod reservations to check, or is structured and may be released.
func claimNeedsWork(claim *resourcev1alpha2.ResourceClaim) bool {
	if len(claim.Status.ReservedFor) > 0 {
		return true
	}
	return Structured(claim, nil)
}

func (c *Controller) onClaim(obj any) {
	if claim, ok := obj.(*resourcev1alpha2.ResourceClaim); ok && claimNeedsWork(claim) {
		c.queue.Add(key{kindClaim, claim.Namespace, claim.Name})
	}
}

// onClaimDelete enqueues the namespace's pods that wait for claims: the
// deletion may have freed quota.
func (c *Controller) onClaimDelete(obj any) {
	m, ok := controllerutil.ObjectMeta(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.written, m.GetUID())
	c.mu.Unlock()
	c.enqueueWaitingPods(m.GetNamespace())
}

func (c *Controller) enqueueWaitingPods(ns string) {
	var pods []*corev1.Pod
	var err error
	if ns == "" {
		pods, err = c.pods.Lister().List(labels.Everything())
	} else {
		pods, err = c.pods.Lister().ListNamespace(ns, labels.Everything())
	}
	if err != nil {
		c.log.Error("list pods", "namespace", ns, "err", err)
		return
	}
	for _, p := range pods {
		if len(ClaimsToCreate(p)) > 0 || c.needsContext(p) {
			c.queue.Add(key{kindPod, p.Namespace, p.Name})
		}
	}
}

func (c *Controller) resync() {
	c.forgetNodes()
	c.enqueueWaitingPods("")
	claims, err := c.claims.Lister().List(labels.Everything())
	if err != nil {
		c.log.Error("list claims", "err", err)
		return
	}
	for _, cl := range claims {
		c.onClaim(cl)
	}
	claimsV1, err := c.claimsV1.Lister().List(labels.Everything())
	if err != nil {
		c.log.Error("list claims", "version", versionV1, "err", err)
		return
	}
	for _, cl := range claimsV1 {
		c.onClaimV1(cl)
	}
}

// Run waits for the informers' caches (the caller starts the factory),
// then syncs with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	c.events = client.NewEventRecorder(c.c, "resourceclaim-controller", hostname())
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), c.opts.APITimeout)
		defer cancel()
		c.events.Shutdown(sctx)
	}()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced, c.claims.HasSynced, c.tmpls.HasSynced, c.classes.HasSynced, c.contexts.HasSynced,
		c.claimsV1.HasSynced, c.tmplsV1.HasSynced, c.nodes.HasSynced, c.leases.HasSynced) {
		return fmt.Errorf("sync caches of the resourceclaim controller: %w", context.Cause(ctx))
	}
	controllerutil.ShutDownOnDone(ctx, c.queue)
	c.log.Info("resourceclaim controller started", "workers", max(workers, 1))
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			controllerutil.RunWorker(ctx, c.queue, c.sync, c.log)
		}()
	}
	t := time.NewTicker(c.opts.ResyncInterval)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
			c.resync()
		}
	}
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) sync(ctx context.Context, k key) error {
	switch k.kind {
	case kindPod:
		return c.syncPod(ctx, k.namespace, k.name)
	case kindClaimV1:
		return c.syncClaimV1(ctx, k.namespace, k.name)
	}
	return c.syncClaim(ctx, k.namespace, k.name)
}

// apiContext bounds one API call.
func (c *Controller) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.APITimeout)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
