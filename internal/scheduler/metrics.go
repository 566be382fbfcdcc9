package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	corev1 "allot.dev/allot/api/core/v1"
)

// Attempt results, the "result" label of the attempt metrics.
const (
	ResultScheduled     = "scheduled"
	ResultUnschedulable = "unschedulable"
	ResultError         = "error"
	// ResultAllocated is the result of a claim cycle that reserved the
	// claims of a pod given a node by hand and handed them to a binding.
	ResultAllocated = "allocated"
)

// Metrics are the scheduler's Prometheus metrics, in their own registry
// for the caller to serve (promhttp.HandlerFor(m.Registry, ...)).
type Metrics struct {
	// Registry holds every metric below.
	Registry *prometheus.Registry

	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	podDuration     prometheus.Histogram
	pending         *prometheus.GaugeVec
	bindDuration    *prometheus.HistogramVec
	claimCycles     *prometheus.CounterVec
	claimsAllocated prometheus.Counter
}

// NewMetrics creates the metrics in a new registry.
func NewMetrics() *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5ms .. ~16s
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allot_scheduler_schedule_attempts_total",
			Help: "Scheduling attempts by result: scheduled, unschedulable (including waiting) or error.",
		}, []string{"result"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "allot_scheduler_scheduling_attempt_duration_seconds",
			Help:    "Latency of one scheduling cycle (snapshot, filter, score, reserve), by result.",
			Buckets: buckets,
		}, []string{"result"}),
		podDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "allot_scheduler_pod_scheduling_duration_seconds",
			Help:    "Time from a pod's first entry into the queue to its successful binding.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
		}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_scheduler_pending_pods",
			Help: "Pending pods by queue: active, backoff or unschedulable.",
		}, []string{"queue"}),
		bindDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "allot_scheduler_binding_duration_seconds",
			Help:    "Latency of the binding step (bind contributors and the Binding write), by result.",
			Buckets: buckets,
		}, []string{"result"}),
		claimCycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allot_scheduler_claim_cycles_total",
			Help: "Claim cycles (pods given a node by hand whose claims were not allocated and reserved) by result: allocated (reserved and handed to a binding), unschedulable (including waiting) or error.",
		}, []string{"result"}),
		claimsAllocated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "allot_scheduler_dra_claims_allocated_total",
			Help: "ResourceClaims the scheduler allocated with structured parameters, counted when the binding that records the allocation succeeds.",
		}),
	}
	m.Registry.MustRegister(m.attempts, m.attemptDuration, m.podDuration, m.pending, m.bindDuration, m.claimCycles, m.claimsAllocated)
	for _, r := range []string{ResultScheduled, ResultUnschedulable, ResultError} {
		m.attempts.WithLabelValues(r)
	}
	for _, r := range []string{ResultAllocated, ResultUnschedulable, ResultError} {
		m.claimCycles.WithLabelValues(r)
	}
	m.setPending(0, 0, 0)
	return m
}

func (m *Metrics) setPending(active, backoff, unschedulable int) {
	m.pending.WithLabelValues("active").Set(float64(active))
	m.pending.WithLabelValues("backoff").Set(float64(backoff))
	m.pending.WithLabelValues("unschedulable").Set(float64(unschedulable))
}

// observeBinding counts the claims a successful Binding allocated (those
// it only reserves carry no allocation).
func (m *Metrics) observeBinding(b *corev1.Binding) {
	for _, c := range b.ResourceClaims {
		if c.Allocation != nil {
			m.claimsAllocated.Inc()
		}
	}
}
