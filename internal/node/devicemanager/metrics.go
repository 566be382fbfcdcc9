package devicemanager

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the device manager's own Prometheus collectors.
type metrics struct {
	registry      *prometheus.Registry
	registrations *prometheus.CounterVec
	allocDuration *prometheus.HistogramVec
	capacity      *prometheus.GaugeVec
	allocatable   *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "device_plugin_registration_total", Help: "Device plugin registrations, by resource.",
		}, []string{"resource_name"}),
		allocDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "device_plugin_alloc_duration_seconds", Help: "Duration of device allocations (choice and Allocate), by resource.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"resource_name"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "device_plugin_capacity_devices", Help: "Devices a plugin reports, by resource.",
		}, []string{"resource_name"}),
		allocatable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "device_plugin_allocatable_devices", Help: "Healthy devices a plugin reports, by resource.",
		}, []string{"resource_name"}),
	}
	m.registry.MustRegister(m.registrations, m.allocDuration, m.capacity, m.allocatable)
	return m
}

func (m *metrics) setResources(rs []Resource) {
	for _, r := range rs {
		if r.State == StateRemoved {
			m.capacity.DeleteLabelValues(r.Name)
			m.allocatable.DeleteLabelValues(r.Name)
			continue
		}
		m.capacity.WithLabelValues(r.Name).Set(float64(r.Capacity))
		m.allocatable.WithLabelValues(r.Name).Set(float64(r.Allocatable))
	}
}

// Registry returns the registry holding the device manager's metrics,
// for the agent to gather with its own.
func (m *Manager) Registry() *prometheus.Registry { return m.metrics.registry }
