// Package podgc deletes the pods nothing else will, as
// kube-controller-manager's pod garbage collector does:
//
//   - pods bound to a node that no longer exists (missing from the node
//     informer for OrphanQuarantine, then confirmed by a live GET, so a
//     node created a moment ago or an informer behind cannot cost pods);
//   - pods terminating on a node tainted node.kubernetes.io/out-of-service
//     that is not Ready: the operator says the machine is down, no agent
//     will finish their deletion;
//   - pods terminating that were never bound (no agent owns them);
//   - terminated pods (Succeeded or Failed) beyond TerminatedThreshold,
//     oldest first.
//
// A pod of the first three kinds is marked Failed with a DisruptionTarget
// condition (reason DeletionByPodGC), then deleted with a zero grace
// period. Its claims are the claim controller's to release; its rule
// (a reservation of a gone pod is dropped only when no node may still
// have the claim prepared) lets them go because the node is deleted or
// out of service. The collector runs every Period.
package podgc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// Defaults, as Kubernetes'.
const (
	DefaultTerminatedThreshold = 12500
	DefaultPeriod              = 20 * time.Second
	DefaultOrphanQuarantine    = 40 * time.Second
)

// Condition and reasons the collector writes, as Kubernetes names them.
const (
	ConditionDisruptionTarget corev1.PodConditionType = "DisruptionTarget"
	ReasonDeletionByPodGC                             = "DeletionByPodGC"
)

// Reasons of the deletions metric.
const (
	reasonOrphaned                = "orphaned"
	reasonTerminatingOutOfService = "terminating_out_of_service"
	reasonUnscheduledTerminating  = "unscheduled_terminating"
	reasonTerminated              = "terminated"
)

// Options tune the collector. Zero values take the defaults; a negative
// TerminatedThreshold keeps every terminated pod.
type Options struct {
	TerminatedThreshold int
	Period              time.Duration
	OrphanQuarantine    time.Duration
	// Registry receives pod_gc_collector_force_delete_pods_total and
	// pod_gc_collector_force_delete_pod_errors_total (nil: none).
	Registry prometheus.Registerer
	Logger   *slog.Logger
	Now      func() time.Time
}

// Collector is the pod garbage collector.
type Collector struct {
	c     *client.Client
	pods  client.Informer[*corev1.Pod]
	nodes client.Informer[*corev1.Node]
	opts  Options
	// missingSince is when each node first appeared missing while pods
	// were bound to it. Used by the Run goroutine only.
	missingSince map[string]time.Time
	deleted      *prometheus.CounterVec
	errors       *prometheus.CounterVec
}

// New creates a collector over the factory's pod and node informers.
func New(c *client.Client, f *client.Factory, opts Options) (*Collector, error) {
	if opts.TerminatedThreshold == 0 {
		opts.TerminatedThreshold = DefaultTerminatedThreshold
	}
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	if opts.OrphanQuarantine <= 0 {
		opts.OrphanQuarantine = DefaultOrphanQuarantine
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Collector{c: c, pods: f.Pods(), nodes: f.Nodes(), opts: opts, missingSince: map[string]time.Time{},
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pod_gc_collector_force_delete_pods_total",
			Help: "Pods deleted by the pod garbage collector, by namespace and reason (orphaned, terminating_out_of_service, unscheduled_terminating, terminated).",
		}, []string{"namespace", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pod_gc_collector_force_delete_pod_errors_total",
			Help: "Pod deletions by the pod garbage collector that failed, by namespace and reason.",
		}, []string{"namespace", "reason"}),
	}
	if opts.Registry != nil {
		for _, m := range []prometheus.Collector{g.deleted, g.errors} {
			if err := opts.Registry.Register(m); err != nil {
				return nil, fmt.Errorf("register pod GC metrics: %w", err)
			}
		}
	}
	return g, nil
}

// Run collects every Period until ctx ends. The factory must be started
// by the caller.
func (g *Collector) Run(ctx context.Context) {
	t := time.NewTicker(g.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if g.pods.HasSynced() && g.nodes.HasSynced() {
				g.collect(ctx)
			}
		}
	}
}

func (g *Collector) collect(ctx context.Context) {
	pods, err := g.pods.Lister().List(labels.Everything())
	if err != nil {
		g.opts.Logger.Error("list pods", "err", err)
		return
	}
	nodes := map[string]*corev1.Node{}
	nodeList, err := g.nodes.Lister().List(labels.Everything())
	if err != nil {
		g.opts.Logger.Error("list nodes", "err", err)
		return
	}
	for _, n := range nodeList {
		nodes[n.Name] = n
	}
	g.collectTerminated(ctx, pods)
	g.collectOrphaned(ctx, pods, nodes)
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			continue
		}
		switch n := nodes[p.Spec.NodeName]; {
		case p.Spec.NodeName == "":
			g.failAndDelete(ctx, p, reasonUnscheduledTerminating, "PodGC: the pod is terminating and was never bound to a node")
		case n != nil && n.OutOfService() && !nodeReady(n):
			g.failAndDelete(ctx, p, reasonTerminatingOutOfService, fmt.Sprintf("PodGC: node %s is out of service", n.Name))
		}
	}
}

// collectTerminated deletes the oldest terminated pods beyond the threshold.
func (g *Collector) collectTerminated(ctx context.Context, pods []*corev1.Pod) {
	if g.opts.TerminatedThreshold < 0 {
		return
	}
	var done []*corev1.Pod
	for _, p := range pods {
		if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && p.DeletionTimestamp == nil {
			done = append(done, p)
		}
	}
	extra := len(done) - g.opts.TerminatedThreshold
	if extra <= 0 {
		return
	}
	slices.SortFunc(done, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	g.opts.Logger.Info("deleting terminated pods beyond the threshold", "terminated", len(done), "threshold", g.opts.TerminatedThreshold, "deleting", extra)
	for _, p := range done[:extra] {
		g.delete(ctx, p, reasonTerminated)
	}
}

// collectOrphaned fails and deletes the pods of nodes that no longer exist.
func (g *Collector) collectOrphaned(ctx context.Context, pods []*corev1.Pod, nodes map[string]*corev1.Node) {
	now := g.opts.Now()
	orphans := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if n := p.Spec.NodeName; n != "" && nodes[n] == nil {
			orphans[n] = append(orphans[n], p)
		}
	}
	for n := range g.missingSince {
		if _, still := orphans[n]; !still {
			delete(g.missingSince, n)
		}
	}
	for n, ps := range orphans {
		since, seen := g.missingSince[n]
		if !seen {
			g.missingSince[n] = now
			continue
		}
		if now.Sub(since) < g.opts.OrphanQuarantine {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := g.c.Nodes().Get(cctx, n)
		cancel()
		switch {
		case err == nil:
			delete(g.missingSince, n) // the informer was behind
			continue
		case !apierrors.IsNotFound(err):
			g.opts.Logger.Warn("check node of orphaned pods", "node", n, "err", err)
			continue
		}
		for _, p := range ps {
			g.failAndDelete(ctx, p, reasonOrphaned, fmt.Sprintf("PodGC: node %s no longer exists", n))
		}
	}
}

// failAndDelete marks p Failed with a DisruptionTarget condition, unless
// it already terminated, then deletes it with a zero grace period.
func (g *Collector) failAndDelete(ctx context.Context, p *corev1.Pod, reason, msg string) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		q := p.DeepCopy()
		q.Status.Phase = corev1.PodFailed
		now := metav1.NewTime(g.opts.Now())
		cond := corev1.PodCondition{Type: ConditionDisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonDeletionByPodGC, Message: msg, LastTransitionTime: now}
		if i := slices.IndexFunc(q.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == ConditionDisruptionTarget }); i >= 0 {
			q.Status.Conditions[i] = cond
		} else {
			q.Status.Conditions = append(q.Status.Conditions, cond)
		}
		if _, err := g.c.Pods(p.Namespace).UpdateStatus(cctx, q); err != nil && !apierrors.IsNotFound(err) {
			// A conflict: the next pass sees the fresher pod.
			g.errors.WithLabelValues(p.Namespace, reason).Inc()
			g.opts.Logger.Warn("mark pod failed before deleting it", "pod", p.Namespace+"/"+p.Name, "err", err)
			return
		}
	}
	g.opts.Logger.Info("deleting pod", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "reason", msg)
	g.delete(ctx, p, reason)
}

// delete removes p at once, if it is still the pod seen (same UID).
func (g *Collector) delete(ctx context.Context, p *corev1.Pod, reason string) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	zero := int64(0)
	uid := types.UID(p.UID)
	err := g.c.Pods(p.Namespace).Delete(cctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		g.deleted.WithLabelValues(p.Namespace, reason).Inc()
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		g.errors.WithLabelValues(p.Namespace, reason).Inc()
		g.opts.Logger.Warn("delete pod", "pod", p.Namespace+"/"+p.Name, "reason", reason, "err", err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
