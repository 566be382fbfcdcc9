package nodelifecycle

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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
