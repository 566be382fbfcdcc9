package nodelifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// Zone labels, newest first, as Kubernetes reads them.
var zoneLabels = []string{"topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"}

func zoneOf(n *corev1.Node) string {
	for _, l := range zoneLabels {
		if z := n.Labels[l]; z != "" {
			return z
		}
	}
	return ""
}

// lifecycleTaint is the NoExecute taint a node's Ready condition calls
// for: unreachable while Unknown, not-ready while False, none while True
// or missing (a node not yet heartbeating; the staleness check gives it
// an Unknown condition once its grace period has passed).
func lifecycleTaint(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		switch c.Status {
		case corev1.ConditionTrue:
			return ""
		case corev1.ConditionFalse:
			return corev1.TaintNodeNotReady
		}
		return corev1.TaintNodeUnreachable
	}
	return ""
}

func isLifecycleTaint(t corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady)
}

// zoneState is a zone's health, as Kubernetes' node lifecycle controller
// judges it.
type zoneState string

const (
	zoneNormal            zoneState = "Normal"
	zonePartialDisruption zoneState = "PartialDisruption"
	zoneFullDisruption    zoneState = "FullDisruption"
)

func judgeZone(ready, unhealthy int, threshold float64) zoneState {
	switch {
	case ready == 0 && unhealthy > 0:
		return zoneFullDisruption
	case unhealthy > 2 && float64(unhealthy)/float64(ready+unhealthy) >= threshold:
		return zonePartialDisruption
	}
	return zoneNormal
}

// taintMetrics are Kubernetes' node_collector_* metrics.
type taintMetrics struct {
	evictions *prometheus.CounterVec
	size      *prometheus.GaugeVec
	unhealthy *prometheus.GaugeVec
	health    *prometheus.GaugeVec
}

func newTaintMetrics(reg prometheus.Registerer) (*taintMetrics, error) {
	m := &taintMetrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "node_collector_evictions_total",
			Help: "Nodes tainted NoExecute (unreachable or not-ready) by the node lifecycle controller, by zone: their pods are evicted once their tolerations run out."}, []string{"zone"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "node_collector_zone_size",
			Help: "Nodes per zone."}, []string{"zone"}),
		unhealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "node_collector_unhealthy_nodes_in_zone",
			Help: "Nodes per zone whose Ready condition is not True."}, []string{"zone"}),
		health: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "node_collector_zone_health",
			Help: "Percentage of a zone's nodes that are Ready."}, []string{"zone"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.evictions, m.size, m.unhealthy, m.health} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register node lifecycle metrics: %w", err)
			}
		}
	}
	return m, nil
}

// taintNodes keeps each node's lifecycle taint in step with its Ready
// condition. Taints come off at once; new ones go on at each zone's rate:
// EvictionRate nodes per second, SecondaryEvictionRate (0 in a zone of at
// most LargeClusterSizeThreshold nodes) once UnhealthyZoneThreshold of a
// zone's nodes (and more than two) are unhealthy, none while every zone
// is wholly unhealthy (the control plane, not the nodes, is then most
// likely cut off): a zone outage must not empty the cluster.
func (c *Controller) taintNodes(ctx context.Context, nodes []*corev1.Node) {
	type zoneCount struct{ ready, unhealthy int }
	zones := map[string]*zoneCount{}
	for _, n := range nodes {
		z := zones[zoneOf(n)]
		if z == nil {
			z = &zoneCount{}
			zones[zoneOf(n)] = z
		}
		if lifecycleTaint(n) == "" {
			z.ready++
		} else {
			z.unhealthy++
		}
	}
	allDisrupted := len(zones) > 0
	states := map[string]zoneState{}
	for name, z := range zones {
		states[name] = judgeZone(z.ready, z.unhealthy, c.opts.UnhealthyZoneThreshold)
		allDisrupted = allDisrupted && states[name] == zoneFullDisruption
		c.metrics.size.WithLabelValues(name).Set(float64(z.ready + z.unhealthy))
		c.metrics.unhealthy.WithLabelValues(name).Set(float64(z.unhealthy))
		c.metrics.health.WithLabelValues(name).Set(100 * float64(z.ready) / float64(z.ready+z.unhealthy))
	}
	for name, z := range zones {
		r := c.opts.EvictionRate
		switch {
		case allDisrupted:
			r = 0
		case states[name] == zonePartialDisruption && z.ready+z.unhealthy > c.opts.LargeClusterSizeThreshold:
			r = c.opts.SecondaryEvictionRate
		case states[name] == zonePartialDisruption:
			r = 0
		}
		lim := c.limiters[name]
		if lim == nil {
			lim = rate.NewLimiter(rate.Limit(r), 1)
			c.limiters[name] = lim
		} else if lim.Limit() != rate.Limit(r) {
			lim.SetLimitAt(c.opts.Now(), rate.Limit(r))
		}
		if s := c.zoneStates[name]; s != states[name] {
			c.opts.Logger.Info("zone health changed", "zone", name, "state", states[name], "ready", z.ready, "unhealthy", z.unhealthy, "taintsPerSecond", r)
			c.zoneStates[name] = states[name]
		}
	}
	for _, n := range nodes {
		if err := c.taintNode(ctx, n); err != nil {
			c.opts.Logger.Warn("taint node", "node", n.Name, "err", err)
		}
	}
}

// taintNode sets or clears n's lifecycle taint.
func (c *Controller) taintNode(ctx context.Context, n *corev1.Node) error {
	want := lifecycleTaint(n)
	var have []corev1.Taint
	for _, t := range n.Spec.Taints {
		if isLifecycleTaint(t) {
			have = append(have, t)
		}
	}
	if len(have) == 1 && have[0].Key == want || len(have) == 0 && want == "" {
		return nil
	}
	// A new taint waits for its zone's rate; replacing one (not-ready to
	// unreachable) or removing one does not.
	if lim := c.limiters[zoneOf(n)]; want != "" && len(have) == 0 && (lim.Limit() == 0 || !lim.AllowN(c.opts.Now(), 1)) {
		return nil // a limiter of rate 0 would still give its one burst token
	}
	out := n.DeepCopy()
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, isLifecycleTaint)
	if want != "" {
		added := metav1.NewTime(c.opts.Now())
		out.Spec.Taints = append(out.Spec.Taints, corev1.Taint{Key: want, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added})
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.c.Nodes().Update(cctx, out); err != nil {
		return err // a conflict: the next check sees the fresher node
	}
	switch {
	case want == "":
		c.opts.Logger.Info("node ready again; lifecycle taint removed", "node", n.Name)
		c.event(n, EventReasonNodeReady, "Node %s status is now: NodeReady; lifecycle taint removed", n.Name)
	case len(have) == 0:
		c.metrics.evictions.WithLabelValues(zoneOf(n)).Inc()
		c.opts.Logger.Info("node tainted; pods not tolerating it will be evicted", "node", n.Name, "taint", want)
		c.event(n, EventReasonNodeNotReady, "Node %s status is now: NodeNotReady; tainted %s:NoExecute, its pods not tolerating it are evicted", n.Name, want)
	}
	return nil
}

// The reasons of the Events on a Node when its lifecycle taint comes and
// goes, as Kubernetes' node lifecycle controller names its status changes.
const (
	EventReasonNodeNotReady = "NodeNotReady"
	EventReasonNodeReady    = "NodeReady"
)

// event records a Normal Event on the node, once Run has a recorder.
func (c *Controller) event(n *corev1.Node, reason, format string, args ...any) {
	if c.events != nil {
		c.events.Eventf(n, corev1.EventTypeNormal, reason, format, args...)
	}
}
