// Package nodelifecycle marks nodes whose agent stopped heartbeating and
// taints them so that their pods are evicted. When
// neither a node's heartbeat Lease (kube-node-lease/NAME, renewTime) nor
// its Ready condition (lastHeartbeatTime) has been renewed for the grace
// period, its Ready condition becomes Unknown with reason
// NodeStatusUnknown, so the scheduler stops placing pods there. The node
// agent's next heartbeat sets it back to True. While the API server refuses
// writes for want of storage (507) no heartbeat can be written, so the
// grace period then counts from the last refused write.
//
// Each check also keeps every node's NoExecute taint in step with its
// Ready condition, as Kubernetes does: node.kubernetes.io/unreachable
// while Unknown, node.kubernetes.io/not-ready while False, none while True
// (taints.go). New taints are rate-limited per zone; the taint eviction
// controller evicts the pods that do not tolerate them. A taint added is
// a NodeNotReady Event on the Node, its removal a NodeReady one.
//
// The controller reads nodes from an informer and writes the Ready
// condition through nodes/status and the taints through the Node,
// retrying on conflicts at the next check.
package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// Reason set on the Ready condition of a node that stopped heartbeating.
const (
	ReasonNodeStatusUnknown = "NodeStatusUnknown"
	messageStopped          = "Node agent stopped posting node status."
)

// Options tune the controller.
type Options struct {
	// GracePeriod is how long a heartbeat stays valid (default 40s).
	GracePeriod time.Duration
	// MonitorPeriod is how often nodes are checked (default 5s).
	MonitorPeriod time.Duration
	// EvictionRate is how many nodes per second a zone may have newly
	// tainted unreachable or not-ready (default 0.1);
	// SecondaryEvictionRate the rate once UnhealthyZoneThreshold (default
	// 0.55) of a zone's nodes are unhealthy, in zones of more than
	// LargeClusterSizeThreshold (default 50) nodes (default 0.01; smaller
	// zones then stop). As Kubernetes' flags of the same names.
	EvictionRate              float64
	SecondaryEvictionRate     float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
	// Registry receives the node_collector_* metrics (nil: none).
	Registry prometheus.Registerer
	Logger   *slog.Logger
	// Now returns the current time (tests).
	Now func() time.Time
}

// Controller marks stale nodes.
type Controller struct {
	c       *client.Client
	nodes   client.Informer[*corev1.Node]
	leases  client.Informer[*coordinationv1.Lease]
	opts    Options
	metrics *taintMetrics
	// events records a node's lifecycle taint coming and going (nil
	// before Run: tests that drive taintNodes directly record none).
	events *client.EventRecorder
	// limiters rate-limit new taints per zone; zoneStates is each zone's
	// last judged health. Used by the Run goroutine only.
	limiters   map[string]*rate.Limiter
	zoneStates map[string]zoneState
	// refusedAt is when the API server last refused a write for want of
	// storage (507). No node could post its status then either, so no
	// node is stale until a grace period after it: once writes resume the
	// agents renew their heartbeats before this controller would mark
	// them. Used by the Run goroutine only.
	refusedAt time.Time
}

// New creates a controller reading nodes from the factory's informer.
func New(c *client.Client, f *client.Factory, opts Options) (*Controller, error) {
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 40 * time.Second
	}
	if opts.MonitorPeriod == 0 {
		opts.MonitorPeriod = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.EvictionRate <= 0 {
		opts.EvictionRate = DefaultEvictionRate
	}
	if opts.SecondaryEvictionRate < 0 {
		opts.SecondaryEvictionRate = 0
	} else if opts.SecondaryEvictionRate == 0 {
		opts.SecondaryEvictionRate = DefaultSecondaryEvictionRate
	}
	if opts.UnhealthyZoneThreshold <= 0 {
		opts.UnhealthyZoneThreshold = DefaultUnhealthyZoneThreshold
	}
	if opts.LargeClusterSizeThreshold <= 0 {
		opts.LargeClusterSizeThreshold = DefaultLargeClusterSizeThreshold
	}
	m, err := newTaintMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	return &Controller{c: c, nodes: f.Nodes(), leases: f.NodeLeases(), opts: opts, metrics: m,
		limiters: map[string]*rate.Limiter{}, zoneStates: map[string]zoneState{}}, nil
}

// Defaults of the taint rate limits, as Kubernetes'.
const (
	DefaultEvictionRate              = 0.1
	DefaultSecondaryEvictionRate     = 0.01
	DefaultUnhealthyZoneThreshold    = 0.55
	DefaultLargeClusterSizeThreshold = 50
)

// Run checks nodes every MonitorPeriod until ctx ends. The factory must be
// started by the caller.
func (c *Controller) Run(ctx context.Context) {
	host, _ := os.Hostname()
	c.events = client.NewEventRecorder(c.c, "node-controller", host)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.events.Shutdown(sctx)
	}()
	t := time.NewTicker(c.opts.MonitorPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c.nodes.HasSynced() && c.leases.HasSynced() {
				c.checkAll(ctx)
			}
		}
	}
}

func (c *Controller) checkAll(ctx context.Context) {
	nodes, err := c.nodes.Lister().List(labels.Everything())
	if err != nil {
		c.opts.Logger.Error("list nodes", "err", err)
		return
	}
	c.checkNodes(ctx, nodes)
	// Taints follow the Ready conditions as the informer shows them; a
	// node marked just now is tainted at the next check.
	c.taintNodes(ctx, nodes)
}

func (c *Controller) checkNodes(ctx context.Context, nodes []*corev1.Node) {
	for _, n := range nodes {
		if err := c.check(ctx, n); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			level := slog.LevelError
			if client.IsInsufficientStorage(err) {
				c.refusedAt = c.opts.Now()
				level = slog.LevelDebug // the client logged the full storage once
			}
			c.opts.Logger.Log(ctx, level, "mark node", "node", n.Name, "err", err)
		}
	}
}

// Stale reports whether a node's last heartbeat is older than grace at now,
// and the index of its Ready condition (-1 if it has none). The last
// heartbeat is the later of the Ready condition's lastHeartbeatTime (the
// node's creation if it has none) and lease's renewTime (lease may be nil).
func Stale(n *corev1.Node, lease *coordinationv1.Lease, grace time.Duration, now time.Time) (bool, int) {
	last, idx := n.CreationTimestamp.Time, -1
	for i, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			idx = i
			if !cond.LastHeartbeatTime.IsZero() {
				last = cond.LastHeartbeatTime.Time
			}
			break
		}
	}
	if lease != nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(last) {
		last = lease.Spec.RenewTime.Time
	}
	return now.Sub(last) > grace, idx
}

// leaseOf is the node's heartbeat Lease, or nil.
func (c *Controller) leaseOf(n *corev1.Node) *coordinationv1.Lease {
	if c.leases.SharedIndexInformer == nil {
		return nil
	}
	l, err := c.leases.Lister().Get(corev1.NamespaceNodeLease, n.Name)
	if err != nil {
		return nil
	}
	return l
}

func (c *Controller) check(ctx context.Context, n *corev1.Node) error {
	now := c.opts.Now()
	stale, i := Stale(n, c.leaseOf(n), c.opts.GracePeriod, now)
	if !stale || (i >= 0 && n.Status.Conditions[i].Status == corev1.ConditionUnknown) {
		return nil
	}
	if !c.refusedAt.IsZero() && now.Sub(c.refusedAt) <= c.opts.GracePeriod {
		return nil // heartbeats could not be written: not the node's fault
	}
	n = n.DeepCopy()
	cond := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown,
		Message: messageStopped, LastTransitionTime: metav1.NewTime(now),
	}
	if i >= 0 {
		cond.LastHeartbeatTime = n.Status.Conditions[i].LastHeartbeatTime
		n.Status.Conditions[i] = cond
	} else {
		n.Status.Conditions = append(n.Status.Conditions, cond)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.c.Nodes().UpdateStatus(cctx, n); err != nil {
		return fmt.Errorf("mark node %s not ready: %w", n.Name, err)
	}
	c.opts.Logger.Info("node stopped heartbeating", "node", n.Name, "grace", c.opts.GracePeriod)
	return nil
}
