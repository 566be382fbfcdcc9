package controllerutil

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// QueueMetrics are the work queue metrics of a controller process, one
// series per queue (label name), under the names Kubernetes' controllers
// use (workqueue_depth, workqueue_queue_duration_seconds, ...). Pass it as
// the MetricsProvider of every queue's config; queue names must be
// unique in the process.
type QueueMetrics struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = (*QueueMetrics)(nil)

// NewQueueMetrics creates the work queue metrics and registers them with
// reg.
func NewQueueMetrics(reg prometheus.Registerer) (*QueueMetrics, error) {
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 12) // 100µs .. ~7min
	name := []string{"name"}
	m := &QueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Keys waiting in the work queue, by queue.",
		}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Keys added to the work queue, by queue.",
		}, name),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "Time a key waits in the work queue before a worker takes it, by queue.",
			Buckets: buckets,
		}, name),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "Time a worker spends on one key, by queue.",
			Buckets: buckets,
		}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds",
			Help: "Sum of the ages of the keys workers are processing now, by queue; growth without completions means stuck workers.",
		}, name),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds", Help: "Age of the oldest key a worker is processing now, by queue.",
		}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Keys re-queued with rate limiting after a failed sync, by queue.",
		}, name),
	}
	for _, c := range []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register work queue metrics: %w", err)
		}
	}
	return m, nil
}

// NewDepthMetric implements workqueue.MetricsProvider.
func (m *QueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

// NewAddsMetric implements workqueue.MetricsProvider.
func (m *QueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

// NewLatencyMetric implements workqueue.MetricsProvider.
func (m *QueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}

// NewWorkDurationMetric implements workqueue.MetricsProvider.
func (m *QueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric implements workqueue.MetricsProvider.
func (m *QueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

// NewLongestRunningProcessorSecondsMetric implements
// workqueue.MetricsProvider.
func (m *QueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunning.WithLabelValues(name)
}

// NewRetriesMetric implements workqueue.MetricsProvider.
func (m *QueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
