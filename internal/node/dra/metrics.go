package dra

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Operations, the operation label of the metrics.
const (
	opPrepare      = "prepare"
	opUnprepare    = "unprepare"
	opListAndWatch = "list_and_watch"
	opRegister     = "register"
	opHealth       = "health"
)

// metrics are the DRA manager's own Prometheus collectors.
type metrics struct {
	registry    *prometheus.Registry
	duration    *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	drivers     prometheus.Gauge
	prepared    prometheus.Gauge
	sliceWrites *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dra_operations_duration_seconds", Help: "Duration of calls to DRA drivers, by driver and operation (prepare, unprepare).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"driver", "operation"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dra_operation_errors_total",
			Help: "Failed DRA operations, by driver and operation (prepare, unprepare, list_and_watch, register).",
		}, []string{"driver", "operation"}),
		drivers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dra_registered_drivers", Help: "DRA drivers registered on this node.",
		}),
		prepared: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dra_prepared_claims", Help: "Resource claims prepared (or being prepared) on this node.",
		}),
		sliceWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dra_resource_slice_writes_total", Help: "NodeResourceSlice writes, by operation (create, update, delete).",
		}, []string{"operation"}),
	}
	m.registry.MustRegister(m.duration, m.errors, m.drivers, m.prepared, m.sliceWrites)
	return m
}

// observe records one call to a driver.
func (m *metrics) observe(driver, op string, start time.Time, err error) {
	m.duration.WithLabelValues(driver, op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(driver, op).Inc()
	}
}

// Registry returns the registry holding the DRA manager's metrics, for
// the agent to gather with its own.
func (m *Manager) Registry() *prometheus.Registry { return m.metrics.registry }
