package scheduler

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	"allot.dev/allot/pkg/client"
)

// ReasonUnattempted is the reason label of allot_scheduler_pending_pods_by_reason
// for pending pods without a PodScheduled condition yet.
const ReasonUnattempted = "Unattempted"

var (
	descStructuredClasses = prometheus.NewDesc("allot_scheduler_dra_structured_classes",
		"ResourceClasses whose claims the scheduler allocates with structured parameters (classes without controllerName).", nil, nil)
	descParameterTypes = prometheus.NewDesc("allot_scheduler_dra_claim_parameter_types",
		"Parameter types (apiGroup and kind) that claims of structured classes reference, by resolved: true when every such "+
			"reference finds its ResourceClaimParameters (the object itself, or one generatedFrom it).", []string{"resolved"}, nil)
	descStructuredClaims = prometheus.NewDesc("allot_scheduler_dra_structured_claims_allocated",
		"ResourceClaims currently allocated with structured parameters.", nil, nil)
	descPendingByReason = prometheus.NewDesc("allot_scheduler_pending_pods_by_reason",
		"This scheduler's pods waiting for a node (by their PodScheduled reason, "+ReasonUnattempted+" before the first failure) "+
			"or, given a node by hand, for their claims (by their ResourceClaimsAllocated reason).", []string{"reason"}, nil)
)

// stateCollector computes gauges from the scheduler's informer caches
// when scraped, so they can never drift from the objects.
type stateCollector struct {
	schedulerName string
	pods          client.Lister[*corev1.Pod]
	classes       client.Lister[*resourcev1alpha2.ResourceClass]
	claims        client.Lister[*resourcev1alpha2.ResourceClaim]
	claimParams   client.Lister[*resourcev1alpha2.ResourceClaimParameters]
}

var _ prometheus.Collector = (*stateCollector)(nil)

// RegisterStateMetrics registers with the scheduler's registry the gauges
// computed from its caches at scrape time: the DRA structured-parameter
// gauges and the pending pods by reason. Call it once, after New.
func (s *Scheduler) RegisterStateMetrics() error {
	if s.factory == nil {
		return fmt.Errorf("register scheduler state metrics: the scheduler has no informers")
	}
	f := s.factory
	c := &stateCollector{schedulerName: s.cfg.SchedulerName, pods: f.Pods().Lister(), classes: f.ResourceClasses().Lister(),
		claims: f.ResourceClaims().Lister(), claimParams: f.ResourceClaimParameters().Lister()}
	if err := s.metrics.Registry.Register(c); err != nil {
		return fmt.Errorf("register scheduler state metrics: %w", err)
	}
	return nil
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStructuredClasses, descParameterTypes, descStructuredClaims, descPendingByReason} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A list that fails is
// reported as an invalid metric, so the scrape shows the error.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	all := labels.Everything()
	classes, err := c.classes.List(all)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descStructuredClasses, err)
		return
	}
	claims, err := c.claims.List(all)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descStructuredClaims, err)
		return
	}
	params, err := c.claimParams.List(all)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descParameterTypes, err)
		return
	}
	pods, err := c.pods.List(all)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descPendingByReason, err)
		return
	}
	st := draState(classes, claims, params)
	ch <- prometheus.MustNewConstMetric(descStructuredClasses, prometheus.GaugeValue, float64(st.structuredClasses))
	ch <- prometheus.MustNewConstMetric(descParameterTypes, prometheus.GaugeValue, float64(st.resolvedTypes), "true")
	ch <- prometheus.MustNewConstMetric(descParameterTypes, prometheus.GaugeValue, float64(st.unresolvedTypes), "false")
	ch <- prometheus.MustNewConstMetric(descStructuredClaims, prometheus.GaugeValue, float64(st.allocatedClaims))
	for reason, n := range pendingByReason(c.schedulerName, pods) {
		ch <- prometheus.MustNewConstMetric(descPendingByReason, prometheus.GaugeValue, float64(n), reason)
	}
}

// draGauges are the DRA gauges of one scrape.
type draGauges struct {
	structuredClasses              int
	resolvedTypes, unresolvedTypes int
	allocatedClaims                int
}

// paramType is a claim parameter type.
type paramType struct{ apiGroup, kind string }

// draState computes the DRA gauges from the objects. A claim's
// parameters resolve as the scheduler resolves them (allocator.Catalog).
func draState(classes []*resourcev1alpha2.ResourceClass, claims []*resourcev1alpha2.ResourceClaim,
	params []*resourcev1alpha2.ResourceClaimParameters) draGauges {
	var g draGauges
	for _, c := range classes {
		if c.ControllerName == "" {
			g.structuredClasses++
		}
	}
	cat := allocator.NewCatalog(&allocator.Snapshot{Classes: classes, ClaimParameters: params})
	resolved := map[paramType]bool{}
	for _, c := range claims {
		if structuredAllocation(c) {
			g.allocatedClaims++
		}
		ref := c.Spec.ParametersRef
		if class := cat.Class(c.Spec.ResourceClassName); ref == nil || class == nil || class.ControllerName != "" {
			continue
		}
		t := paramType{ref.APIGroup, ref.Kind}
		p, _ := cat.ClaimParameters(c.Namespace, ref)
		ok := p != nil
		if prev, seen := resolved[t]; !seen || prev {
			resolved[t] = ok
		}
	}
	for _, ok := range resolved {
		if ok {
			g.resolvedTypes++
		} else {
			g.unresolvedTypes++
		}
	}
	return g
}

// structuredAllocation reports whether a claim is allocated with
// structured parameters: by the scheduler, not by a driver's controller.
func structuredAllocation(c *resourcev1alpha2.ResourceClaim) bool {
	if c.Status.Allocation == nil || c.Status.ControllerName != "" {
		return false
	}
	for _, h := range c.Status.Allocation.ResourceHandles {
		if h.StructuredData != nil {
			return true
		}
	}
	return false
}

// pendingByReason counts schedulerName's pods that wait for a node, and
// the pods given a node by hand that wait for their claims, by reason.
func pendingByReason(schedulerName string, pods []*corev1.Pod) map[string]int {
	// The reasons the scheduler writes are always reported, zero or not.
	out := map[string]int{ReasonUnattempted: 0, corev1.PodReasonUnschedulable: 0, ReasonSchedulerError: 0, ReasonUnallocatable: 0}
	for _, p := range pods {
		if p.Spec.SchedulerName != schedulerName || p.DeletionTimestamp != nil || framework.IsTerminal(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			reason := ReasonUnattempted
			if c := PodScheduledCondition(p); c != nil && c.Status == corev1.ConditionFalse && c.Reason != "" {
				reason = c.Reason
			}
			out[reason]++
			continue
		}
		if c := ClaimsAllocatedCondition(p); c != nil && c.Status == corev1.ConditionFalse {
			out[c.Reason]++
		}
	}
	return out
}
