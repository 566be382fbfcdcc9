package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/pkg/client"
)

func TestReadyConditionKeepsTransitionAndOthers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	tests := map[string]struct {
		cur            []corev1.NodeCondition
		wantTransition time.Time
	}{
		"new":             {nil, now},
		"was ready":       {[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}, t0},
		"was unknown":     {[]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t0)}}, now},
		"other condition": {[]corev1.NodeCondition{{Type: "DiskPressure", Status: corev1.ConditionFalse}}, now},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := readyCondition(tc.cur, now)
			var ready *corev1.NodeCondition
			for i := range got {
				if got[i].Type == corev1.NodeReady {
					ready = &got[i]
				}
			}
			if ready == nil || ready.Status != corev1.ConditionTrue || !ready.LastHeartbeatTime.Time.Equal(now) {
				t.Fatalf("Ready = %+v", ready)
			}
			if !ready.LastTransitionTime.Time.Equal(tc.wantTransition) {
				t.Fatalf("lastTransitionTime %v, want %v", ready.LastTransitionTime, tc.wantTransition)
			}
			if len(got) != max(len(tc.cur), 1)+boolInt(name == "other condition") {
				t.Fatalf("conditions %+v", got)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestConfigValidation(t *testing.T) {
	c := &client.Client{}
	rt, _ := fake.New(fake.Options{})
	tests := map[string]Config{
		"no name":          {Client: c, Runtime: rt},
		"bad name":         {NodeName: "Not_DNS", Client: c, Runtime: rt},
		"no client":        {NodeName: "n", Runtime: rt},
		"no runtime":       {NodeName: "n", Client: c},
		"logs without dir": {NodeName: "n", Client: c, Runtime: rt, LogListen: "127.0.0.1:0"},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestDesiredNodeAppliesDecorators(t *testing.T) {
	rt, _ := fake.New(fake.Options{})
	a, err := New(Config{NodeName: "n1", Client: &client.Client{}, Runtime: rt, MaxPods: 7,
		Labels: map[string]string{"zone": "a"}, NodeDecorators: []NodeDecorator{gpuDecorator{}}})
	if err != nil {
		t.Fatal(err)
	}
	n := a.desiredNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kept": "yes"}}}, time.Now())
	if n.Labels["zone"] != "a" || n.Labels["kept"] != "yes" || n.Labels[LabelHostname] != "n1" {
		t.Errorf("labels %v", n.Labels)
	}
	if q := n.Status.Capacity[corev1.ResourcePods]; q.Value() != 7 {
		t.Errorf("pods capacity %s", q.String())
	}
	if q := n.Status.Allocatable["example.com/gpu"]; q.Value() != 2 {
		t.Errorf("decorated allocatable %v", n.Status.Allocatable)
	}
}

type gpuDecorator struct{}

func (gpuDecorator) DecorateNode(n *corev1.Node) {
	q := *resourceQuantity(2)
	n.Status.Capacity["example.com/gpu"] = q
	n.Status.Allocatable["example.com/gpu"] = q
}

func TestFingerprintIgnoresOrder(t *testing.T) {
	a := []runtime.ContainerStatus{{ID: "1", Name: "a", State: runtime.StateRunning}, {ID: "2", Name: "b", State: runtime.StateExited}}
	b := []runtime.ContainerStatus{a[1], a[0]}
	if fingerprint(a) != fingerprint(b) {
		t.Fatal("fingerprint depends on order")
	}
	b[0].State = runtime.StateRunning
	if fingerprint(a) == fingerprint(b) {
		t.Fatal("fingerprint misses a state change")
	}
}

func TestDispatcherKeepsTombstoneUntilDelete(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, _ := fake.New(fake.Options{})
	cfg := &pods.Config{NodeName: "n1", Runtime: rt, API: goneAPI{}, Metrics: metrics.New(nil), StatusUpdates: false}
	cfg.SetDefaults()
	d := newDispatcher(ctx, cfg, nil)
	grace := int64(0)
	now := metav1.Now()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	d.update(pod)
	deadline := time.Now().Add(10 * time.Second)
	for d.has("u1") {
		if time.Now().After(deadline) {
			t.Fatal("worker did not finish the deletion")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.update(pod) // a late event must not start a new worker
	if d.has("u1") || !d.uids()["u1"] {
		t.Fatal("tombstone lost or worker restarted")
	}
	d.remove(pod)
	if d.uids()["u1"] {
		t.Fatal("entry kept after the informer's delete")
	}
	d.wait()
}

// goneAPI answers as if the pod were already deleted.
type goneAPI struct{}

func (goneAPI) UpdatePodStatus(context.Context, *corev1.Pod) (*corev1.Pod, error) {
	return nil, errors.New("unexpected status write")
}
func (goneAPI) GetPod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, errors.New("unexpected read")
}
func (goneAPI) DeletePod(context.Context, string, string, types.UID) error { return nil }

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }
