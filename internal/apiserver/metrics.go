package apiserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	reg      *prometheus.Registry
	gather   prometheus.Gatherers // reg and the in-process components' registries
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
}

func newMetrics(more []prometheus.Gatherer) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total", Help: "API requests by verb, resource and HTTP code.",
		}, []string{"verb", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "apiserver_request_duration_seconds", Help: "API request latency (watches excluded).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"verb", "resource"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "apiserver_registered_watchers", Help: "Open watch requests.",
		}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.watchers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.gather = append(prometheus.Gatherers{m.reg}, more...)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.gather, promhttp.HandlerOpts{})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		ri := parseRequest(r)
		resource := ri.resource
		if ri.subresource != "" {
			resource += "/" + ri.subresource
		}
		verb := ri.verb
		if verb == "" {
			verb = r.Method
		}
		m.requests.WithLabelValues(verb, resource, strconv.Itoa(rec.code)).Inc()
		if verb != "watch" {
			m.latency.WithLabelValues(verb, resource).Observe(time.Since(start).Seconds())
		}
	})
}
