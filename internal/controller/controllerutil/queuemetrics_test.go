package controllerutil

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

func TestQueueMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewQueueMetrics(reg)
	if err != nil {
		t.Fatalf("NewQueueMetrics: %v", err)
	}
	// A retry waits an hour: the failed key does not come back during
	// the test.
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "things", MetricsProvider: m})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	if got := value(t, m.depth); got != 2 {
		t.Errorf("workqueue_depth = %v after two adds, want 2", got)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fail := func(context.Context, string) error { return errors.New("boom") }
	if !ProcessNext(context.Background(), q, fail, log) {
		t.Fatalf("ProcessNext returned false on a live queue")
	}
	for name, tc := range map[string]struct {
		c    prometheus.Collector
		want float64
	}{
		"workqueue_depth":         {m.depth, 1},
		"workqueue_adds_total":    {m.adds, 2},
		"workqueue_retries_total": {m.retries, 1},
	} {
		if got := value(t, tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", name, got, tc.want)
		}
	}
	for name, h := range map[string]*prometheus.HistogramVec{"queue duration": m.latency, "work duration": m.workDuration} {
		if n := value(t, h); n != 1 {
			t.Errorf("%s observations = %v, want 1", name, n)
		}
	}
	if _, err := NewQueueMetrics(reg); err == nil {
		t.Errorf("NewQueueMetrics on a registry that has them: no error")
	}
}

// value gathers c and sums its samples: counter and gauge values,
// histogram observation counts.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var v float64
	for _, f := range families {
		for _, s := range f.GetMetric() {
			v += s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
		}
	}
	return v
}
