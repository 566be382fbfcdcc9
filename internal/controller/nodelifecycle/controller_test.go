package nodelifecycle

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ready := func(beat time.Time) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(beat)}}
		return n
	}
	lease := func(renew time.Time) *coordinationv1.Lease {
		t := metav1.NewMicroTime(renew)
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &t}}
	}
	tests := map[string]struct {
		node  *corev1.Node
		lease *coordinationv1.Lease
		stale bool
	}{
		"fresh heartbeat":            {node: ready(now.Add(-10 * time.Second)), stale: false},
		"old heartbeat":              {node: ready(now.Add(-41 * time.Second)), stale: true},
		"old heartbeat, fresh lease": {node: ready(now.Add(-5 * time.Minute)), lease: lease(now.Add(-10 * time.Second)), stale: false},
		"old heartbeat, old lease":   {node: ready(now.Add(-5 * time.Minute)), lease: lease(now.Add(-41 * time.Second)), stale: true},
		"fresh heartbeat, old lease": {node: ready(now.Add(-10 * time.Second)), lease: lease(now.Add(-time.Hour)), stale: false},
		"no condition, fresh lease":  {node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}, lease: lease(now), stale: false},
		"lease without renewTime":    {node: ready(now.Add(-41 * time.Second)), lease: &coordinationv1.Lease{}, stale: true},
		"no condition, new":          {node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now)}}, stale: false},
		"no condition, old":          {node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}, stale: true},
		"zero heartbeat, young":      {node: func() *corev1.Node { n := ready(time.Time{}); n.CreationTimestamp = metav1.NewTime(now); return n }(), stale: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got, _ := Stale(tc.node, tc.lease, 40*time.Second, now); got != tc.stale {
				t.Fatalf("Stale = %v, want %v", got, tc.stale)
			}
		})
	}
}

// TestFullStorageIsNotTheNodesFault: while the API server answers writes
// 507 (its etcd is full), the agents' heartbeats are refused too; when
// writes resume the controller must not mark a node NotReady for the
// heartbeats it missed meanwhile, only once a grace period has passed
// after the last refused write without a heartbeat. The API server is
// faked: the far side of a process boundary, only its answers matter.
func TestFullStorageIsNotTheNodesFault(t *testing.T) {
	var full atomic.Bool
	var marked atomic.Int32
	full.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if full.Load() {
			w.WriteHeader(http.StatusInsufficientStorage)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd cannot write","reason":"InsufficientStorage","code":507}`))
			return
		}
		marked.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Write(body)
	}))
	defer srv.Close()
	c, err := client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ctl := &Controller{c: c, opts: Options{GracePeriod: 40 * time.Second, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now.Add(-41 * time.Second))}}

	ctl.checkNodes(context.Background(), []*corev1.Node{n}) // refused: 507
	full.Store(false)
	now = now.Add(30 * time.Second) // writes are back; the node's heartbeat is 71 s old
	ctl.checkNodes(context.Background(), []*corev1.Node{n})
	if marked.Load() != 0 {
		t.Fatal("node marked NotReady right after the storage outage")
	}
	now = now.Add(11 * time.Second) // a grace period after the last refusal
	ctl.checkNodes(context.Background(), []*corev1.Node{n})
	if marked.Load() != 1 {
		t.Fatalf("node marked %d times a grace period after the outage without a heartbeat, want once", marked.Load())
	}
}

func TestLifecycleTaintAndZones(t *testing.T) {
	cond := func(s corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}}
	}
	for _, tc := range []struct {
		node *corev1.Node
		want string
	}{
		{cond(corev1.ConditionTrue), ""},
		{cond(corev1.ConditionFalse), corev1.TaintNodeNotReady},
		{cond(corev1.ConditionUnknown), corev1.TaintNodeUnreachable},
		{&corev1.Node{}, ""}, // not heartbeating yet: the staleness check decides
	} {
		if got := lifecycleTaint(tc.node); got != tc.want {
			t.Errorf("conditions %+v: taint %q, want %q", tc.node.Status.Conditions, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ready, unhealthy int
		want             zoneState
	}{
		{10, 0, zoneNormal}, {0, 3, zoneFullDisruption}, {4, 6, zonePartialDisruption},
		{1, 2, zoneNormal}, // two unhealthy nodes never make a disruption
		{10, 3, zoneNormal},
	} {
		if got := judgeZone(tc.ready, tc.unhealthy, DefaultUnhealthyZoneThreshold); got != tc.want {
			t.Errorf("%d ready, %d unhealthy: %s, want %s", tc.ready, tc.unhealthy, got, tc.want)
		}
	}
}

// TestTaintRateLimits: new lifecycle taints go on at each zone's rate
// (burst one), slower or not at all when a zone is mostly down, and not at
// all while every zone is wholly down; taints come off at once. The API
// server is faked (the far side of a process boundary): it counts the
// Node updates, each a taint added or removed.
func TestTaintRateLimits(t *testing.T) {
	var updates atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		updates.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	c, err := client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	newCtl := func() *Controller {
		m, err := newTaintMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		return &Controller{c: c, metrics: m, limiters: map[string]*rate.Limiter{}, zoneStates: map[string]zoneState{},
			opts: Options{EvictionRate: 0.1, SecondaryEvictionRate: 0.01, UnhealthyZoneThreshold: 0.55, LargeClusterSizeThreshold: 50,
				Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}}
	}
	zone := func(z string, ready, unknown int) []*corev1.Node {
		var out []*corev1.Node
		for i := range ready + unknown {
			s := corev1.ConditionTrue
			if i >= ready {
				s = corev1.ConditionUnknown
			}
			out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", z, i), Labels: map[string]string{"topology.kubernetes.io/zone": z}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}})
		}
		return out
	}
	step := func(ctl *Controller, nodes []*corev1.Node) int32 {
		before := updates.Load()
		ctl.taintNodes(context.Background(), nodes)
		return updates.Load() - before
	}
	// Zone a: 2 of 10 down (normal): one now, the next 10 s later.
	ctl := newCtl()
	nodes := append(zone("a", 8, 2), zone("b", 5, 0)...)
	if n := step(ctl, nodes); n != 1 {
		t.Fatalf("normal zone: %d taints at once, want 1 (burst)", n)
	}
	if n := step(ctl, nodes); n != 1-1 {
		t.Fatalf("normal zone: %d more taints at the same moment, want 0", n)
	}
	now = now.Add(10 * time.Second)
	if n := step(ctl, nodes); n != 1 {
		t.Fatalf("normal zone 10 s later: %d taints, want 1", n)
	}
	// The node_collector_* metrics count them, by zone.
	for name, tc := range map[string]struct {
		c    prometheus.Metric
		want float64
	}{
		"node_collector_evictions_total{zone=a}":         {ctl.metrics.evictions.WithLabelValues("a"), 2},
		"node_collector_evictions_total{zone=b}":         {ctl.metrics.evictions.WithLabelValues("b"), 0},
		"node_collector_zone_size{zone=a}":               {ctl.metrics.size.WithLabelValues("a"), 10},
		"node_collector_unhealthy_nodes_in_zone{zone=a}": {ctl.metrics.unhealthy.WithLabelValues("a"), 2},
		"node_collector_zone_health{zone=a}":             {ctl.metrics.health.WithLabelValues("a"), 80},
	} {
		var m dto.Metric
		if err := tc.c.Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != tc.want {
			t.Errorf("%s = %v, want %v", name, got, tc.want)
		}
	}
	// Zone c, small and mostly down (partial disruption): none.
	if n := step(newCtl(), append(zone("c", 2, 5), zone("b", 5, 0)...)); n != 0 {
		t.Fatalf("small partially disrupted zone: %d taints, want 0", n)
	}
	// Every zone wholly down: none (the control plane is most likely the
	// one cut off).
	if n := step(newCtl(), append(zone("d", 0, 3), zone("e", 0, 2)...)); n != 0 {
		t.Fatalf("all zones down: %d taints, want 0", n)
	}
	// A tainted node that is Ready again loses its taint at once, though
	// its zone's rate is spent.
	ctl = newCtl()
	f := zone("f", 1, 1)
	if n := step(ctl, f); n != 1 {
		t.Fatalf("zone f: %d taints, want 1", n)
	}
	f[0].Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	if n := step(ctl, f); n != 1 {
		t.Fatalf("ready node's taint with the rate spent: %d updates, want 1 (the removal)", n)
	}
}
