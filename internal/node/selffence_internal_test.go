package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/pods"
)

// hangingAPI is a pod API whose calls wait until their context ends, as
// calls through a network partition do.
type hangingAPI struct{ started chan struct{} }

func (h hangingAPI) UpdatePodStatus(ctx context.Context, _ *corev1.Pod) (*corev1.Pod, error) {
	close(h.started)
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

func (h hangingAPI) GetPod(ctx context.Context, _, _ string) (*corev1.Pod, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

func (h hangingAPI) DeletePod(ctx context.Context, _, _ string, _ types.UID) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

var _ pods.API = hangingAPI{}

// TestFencedAPIEndsCallsWhenRaised: a pod worker's API call waiting on a
// partition ends when the fence is raised, and calls fail at once while
// it is, so the worker gets to stop its fenced pod; once a heartbeat
// lowers the fence, calls go through again.
func TestFencedAPIEndsCallsWhenRaised(t *testing.T) {
	f := newSelfFence(time.Second)
	f.poke, f.log = func() {}, func(string, ...any) {}
	t0 := time.Now()
	f.renewed(t0)
	api := fencedAPI{API: hangingAPI{started: make(chan struct{})}, f: f}
	done := make(chan error, 1)
	go func() {
		_, err := api.UpdatePodStatus(context.Background(), &corev1.Pod{})
		done <- err
	}()
	<-api.API.(hangingAPI).started
	f.check(t0.Add(500 * time.Millisecond))
	select {
	case err := <-done:
		t.Fatalf("call ended before the fence was raised: %v", err)
	default:
	}
	f.check(t0.Add(2 * time.Second))
	if err := <-done; !errors.Is(err, errFenced) {
		t.Fatalf("call ended with %v, want errFenced", err)
	}
	if _, err := api.GetPod(context.Background(), "ns", "p"); !errors.Is(err, errFenced) {
		t.Fatalf("call while fenced: %v, want errFenced at once", err)
	}
	f.renewed(t0.Add(3 * time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := api.DeletePod(ctx, "ns", "p", "uid"); !errors.Is(err, context.Canceled) || errors.Is(err, errFenced) {
		t.Fatalf("call after the fence was lowered: %v, want only the caller's cancellation", err)
	}
}

// TestSelfFenceChoosesPods: the fence fails only the pods that hold
// multi-node claims or opt in, only while raised, with its reason and a
// capped grace; its metrics count the raise and each pod once.
func TestSelfFenceChoosesPods(t *testing.T) {
	f := newSelfFence(time.Second)
	f.poke, f.log = func() {}, func(string, ...any) {}
	m := metrics.New(nil)
	f.raised, f.stopped = m.Fences, m.FencedPods
	f.multi = func(uid types.UID) bool { return uid == "multi" }
	pod := func(uid types.UID, annotations map[string]string) *corev1.Pod {
		p := &corev1.Pod{}
		p.UID, p.Annotations = uid, annotations
		return p
	}
	multi, optIn, plain := pod("multi", nil), pod("opt-in", map[string]string{"allot.dev/fence": "true"}), pod("plain", nil)
	t0 := time.Now()
	f.renewed(t0)
	for _, p := range []*corev1.Pod{multi, optIn, plain} {
		if fl := f.PodFailure(p); fl != nil {
			t.Fatalf("pod %s failed before the fence was raised: %+v", p.UID, fl)
		}
	}
	f.check(t0.Add(2 * time.Second))
	for _, p := range []*corev1.Pod{multi, optIn} {
		fl := f.PodFailure(p)
		if fl == nil || fl.Reason != ReasonFenced || fl.Grace == nil || *fl.Grace != FenceStopGrace {
			t.Fatalf("pod %s while fenced: %+v, want reason %s with grace %s", p.UID, fl, ReasonFenced, FenceStopGrace)
		}
	}
	if fl := f.PodFailure(plain); fl != nil {
		t.Fatalf("a pod without multi-node claims failed by the fence: %+v", fl)
	}
	f.check(t0.Add(3 * time.Second)) // still raised: not a second fence
	f.PodFailure(multi)              // asked again: the same pod
	if raised, stopped := counterValue(t, m.Fences), counterValue(t, m.FencedPods); raised != 1 || stopped != 2 {
		t.Fatalf("metrics: %v fences, %v fenced pods; want 1 and 2", raised, stopped)
	}
	f.renewed(t0.Add(3 * time.Second))
	if fl := f.PodFailure(multi); fl != nil {
		t.Fatalf("pod failed after the fence was lowered: %+v", fl)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
