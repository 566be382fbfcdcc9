// Package taineviction evicts pods from nodes with NoExecute taints they
// do not tolerate, as Kubernetes' TaintEvictionController does: a pod
// without a matching toleration is evicted at once; one whose matching
// tolerations all have tolerationSeconds is evicted that long after the
// taint was added (the shortest, over the taints); a toleration without
// tolerationSeconds keeps it. Removing the taint, or the pod's deletion,
// cancels a pending eviction.
//
// An eviction marks the pod with a DisruptionTarget condition (reason
// DeletionByTaintManager), deletes it gracefully (the node agent, if the
// node comes back, stops its containers; a node that stays away leaves it
// terminating until the Node is deleted or tainted out of service), and
// records a TaintManagerEviction event. The node lifecycle controller's
// unreachable and not-ready taints are the usual cause; any NoExecute taint
// an operator sets evicts the same way.
//
// Evictions go through evictor.go, shared with device taint eviction
// (internal/controller/devicetainteviction): one Limiter paces both, and
// EvictPod is what an eviction does.
package taineviction

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/pkg/client"
)

// Condition reason and event reason, as Kubernetes names them.
const (
	ReasonDeletionByTaintManager = "DeletionByTaintManager"
	EventReasonEviction          = "TaintManagerEviction"
	ConditionDisruptionTarget    = corev1.PodConditionType("DisruptionTarget")
)

// Options tune the controller.
type Options struct {
	// Registry receives taint_eviction_controller_pod_deletions_total (nil:
	// none); QueueMetrics the work queue's metrics.
	Registry     prometheus.Registerer
	QueueMetrics workqueue.MetricsProvider
	Logger       *slog.Logger
	Now          func() time.Time
	// Limiter paces evictions; the controller manager shares one with the
	// device taint eviction controller (nil: no limit).
	Limiter *Limiter
}

// Controller evicts pods from NoExecute-tainted nodes.
type Controller struct {
	c       *client.Client
	pods    client.Informer[*corev1.Pod]
	nodes   client.Informer[*corev1.Node]
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	opts    Options
	events  *client.EventRecorder
	deleted prometheus.Counter

	mu sync.Mutex
	// seen is when a taint without timeAdded was first seen, per node and
	// taint key, so its toleration counts from then.
	seen map[[2]string]time.Time
}

// New creates the controller over the factory's pod and node informers.
func New(c *client.Client, f *client.Factory, opts Options) (*Controller, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	t := &Controller{c: c, pods: f.Pods(), nodes: f.Nodes(), opts: opts, seen: map[[2]string]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](200*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "taint_eviction", MetricsProvider: opts.QueueMetrics}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "taint_eviction_controller_pod_deletions_total",
			Help: "Pods deleted because of NoExecute taints they do not tolerate."}),
	}
	if opts.Registry != nil {
		if err := opts.Registry.Register(t.deleted); err != nil {
			return nil, fmt.Errorf("register taint eviction metrics: %w", err)
		}
	}
	if _, err := t.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.enqueuePod(obj) },
		UpdateFunc: func(_, obj any) { t.enqueuePod(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := t.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { t.enqueueNode(obj) },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && slices.EqualFunc(noExecute(o), noExecute(n), func(a, b corev1.Taint) bool { return a.Key == b.Key && a.Value == b.Value }) {
				return
			}
			t.enqueueNode(obj)
		},
	}); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Controller) enqueuePod(obj any) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
		t.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
}

// enqueueNode queues the pods of a node with NoExecute taints. A node
// without any needs nothing: an eviction queued for later finds no taint
// when it comes due, and a pod synced meanwhile is not queued at all.
func (t *Controller) enqueueNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || len(noExecute(n)) == 0 {
		return
	}
	pods, err := t.pods.Lister().List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == n.Name {
			t.enqueuePod(p)
		}
	}
}

// noExecute lists a node's NoExecute taints.
func noExecute(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if tn.Effect == corev1.TaintEffectNoExecute {
			out = append(out, tn)
		}
	}
	return out
}

// Run evicts until ctx ends. The factory must be started by the caller.
func (t *Controller) Run(ctx context.Context, workers int) error {
	host, _ := os.Hostname()
	t.events = client.NewEventRecorder(t.c, "taint-eviction-controller", host)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t.events.Shutdown(sctx)
	}()
	defer t.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), t.pods.HasSynced, t.nodes.HasSynced) {
		return fmt.Errorf("sync caches of the taint eviction controller: %w", context.Cause(ctx))
	}
	controllerutil.ShutDownOnDone(ctx, t.queue)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() { controllerutil.RunWorker(ctx, t.queue, t.sync, t.opts.Logger) })
	}
	wg.Wait()
	return nil
}

// EvictionTime is when pod must leave node for the NoExecute taints it
// does not tolerate long enough, and whether it must at all. since gives
// the time a taint without timeAdded counts from.
func EvictionTime(pod *corev1.Pod, node *corev1.Node, since func(corev1.Taint) time.Time) (time.Time, bool) {
	var at time.Time
	evict := false
	for _, tn := range noExecute(node) {
		added := since(tn)
		if tn.TimeAdded != nil {
			added = tn.TimeAdded.Time
		}
		// The tolerations that match; the pod stays as long as the
		// shortest allows (a match without seconds: for ever).
		var limit *int64
		matched, forever := false, false
		for _, tol := range pod.Spec.Tolerations {
			if !tol.ToleratesTaint(tn) {
				continue
			}
			matched = true
			if tol.TolerationSeconds == nil {
				forever = true
				continue
			}
			if limit == nil || *tol.TolerationSeconds < *limit {
				limit = tol.TolerationSeconds
			}
		}
		var due time.Time
		switch {
		case !matched:
			due = added
		case limit != nil:
			due = added.Add(time.Duration(max(*limit, 0)) * time.Second)
		case forever:
			continue
		}
		if !evict || due.Before(at) {
			at, evict = due, true
		}
	}
	return at, evict
}

func (t *Controller) since(node string) func(corev1.Taint) time.Time {
	return func(tn corev1.Taint) time.Time {
		t.mu.Lock()
		defer t.mu.Unlock()
		k := [2]string{node, tn.Key}
		if s, ok := t.seen[k]; ok {
			return s
		}
		t.seen[k] = t.opts.Now()
		return t.seen[k]
	}
}

func (t *Controller) sync(ctx context.Context, key types.NamespacedName) error {
	pod, err := t.pods.Lister().Get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		return nil
	}
	node, err := t.nodes.Lister().Get("", pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return nil // the pod garbage collector's
	}
	if err != nil {
		return err
	}
	at, evict := EvictionTime(pod, node, t.since(node.Name))
	if !evict {
		return nil
	}
	if wait := at.Sub(t.opts.Now()); wait > 0 {
		t.queue.AddAfter(key, wait)
		return nil
	}
	if wait := t.opts.Limiter.Take(t.opts.Now()); wait > 0 {
		t.queue.AddAfter(key, wait)
		return nil
	}
	return t.evict(ctx, pod, node)
}

// evict marks pod with the DisruptionTarget condition and deletes it.
func (t *Controller) evict(ctx context.Context, pod *corev1.Pod, node *corev1.Node) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var keys []string
	for _, tn := range noExecute(node) {
		keys = append(keys, tn.Key)
	}
	msg := fmt.Sprintf("Taint manager: deleting due to NoExecute taint %v of node %s", keys, node.Name)
	deleted, err := EvictPod(cctx, t.c, pod, Eviction{Reason: ReasonDeletionByTaintManager, Message: msg}, t.opts.Now())
	if err != nil || !deleted {
		return err
	}
	t.deleted.Inc()
	t.events.Eventf(pod, corev1.EventTypeNormal, EventReasonEviction, "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
	t.opts.Logger.Info("evicted pod", "pod", pod.Namespace+"/"+pod.Name, "node", node.Name, "taints", keys)
	return nil
}
