// Package metrics holds the Prometheus metrics of node agents. One Metrics
// may be shared by many agents of one process (simulated nodes); the
// collectors are safe for concurrent use and carry no per-node label, so a
// fleet of simulated nodes costs a fixed number of series.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the node agent's collectors.
type Metrics struct {
	// Registry is the registry the collectors were registered with when
	// New created it; nil when the caller passed its own Registerer.
	Registry *prometheus.Registry

	PodsRunning        prometheus.Gauge
	Workers            prometheus.Gauge
	ContainerStarts    prometheus.Counter
	ContainerRestarts  prometheus.Counter
	ContainerFailures  *prometheus.CounterVec
	PodStartDuration   prometheus.Histogram
	StatusUpdates      *prometheus.CounterVec
	Heartbeats         *prometheus.CounterVec
	PodDeletionsDone   prometheus.Counter
	RelistDuration     prometheus.Histogram
	AdmissionDecisions *prometheus.CounterVec
	// Fences counts the times the self-fence was raised; FencedPods the
	// pods it stopped (docs/decisions.md, "Fencing").
	Fences     prometheus.Counter
	FencedPods prometheus.Counter
}

// New creates the collectors and registers them with reg; a nil reg means
// a new registry, returned in Metrics.Registry.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		PodsRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "allot", Subsystem: "node", Name: "running_pods",
			Help: "Pods whose phase is Running on the node agents of this process.",
		}),
		Workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "allot", Subsystem: "node", Name: "pod_workers",
			Help: "Pod workers alive (one per pod bound to the node, until its deletion completes).",
		}),
		ContainerStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "container_starts_total",
			Help: "Containers started, first attempts and restarts.",
		}),
		ContainerRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "container_restarts_total",
			Help: "Containers started again after they exited.",
		}),
		ContainerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "container_failures_total",
			Help: "Failed attempts to create or start a container, by reason.",
		}, []string{"reason"}),
		PodStartDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "allot", Subsystem: "node", Name: "pod_start_duration_seconds",
			Help:    "Time from the agent first seeing a pod to the pod running.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300},
		}),
		StatusUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "pod_status_updates_total",
			Help: "Pod status writes, by result (ok, conflict, error).",
		}, []string{"result"}),
		Heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "heartbeats_total",
			Help: "Node status heartbeats, by result (ok, error).",
		}, []string{"result"}),
		PodDeletionsDone: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "pod_deletions_completed_total",
			Help: "Graceful pod deletions the agent completed after stopping the containers.",
		}),
		RelistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "allot", Subsystem: "node", Name: "relist_duration_seconds",
			Help:    "Duration of listing the runtime's containers.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}),
		AdmissionDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "pod_admission_total",
			Help: "Admission decisions on pods, by decision (admit, hold, reject).",
		}, []string{"decision"}),
		Fences: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "fences_total",
			Help: "Times the self-fence was raised: no heartbeat reached the API server for --self-fence-after.",
		}),
		FencedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "allot", Subsystem: "node", Name: "fenced_pods_total",
			Help: "Pods the self-fence stopped (failed with reason NodeFenced): pods holding devices other nodes can reach, and pods annotated allot.dev/fence=true.",
		}),
	}
	if reg == nil {
		m.Registry = prometheus.NewRegistry()
		reg = m.Registry
	}
	reg.MustRegister(m.PodsRunning, m.Workers, m.ContainerStarts, m.ContainerRestarts, m.ContainerFailures,
		m.PodStartDuration, m.StatusUpdates, m.Heartbeats, m.PodDeletionsDone, m.RelistDuration, m.AdmissionDecisions,
		m.Fences, m.FencedPods)
	return m
}
