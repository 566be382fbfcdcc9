package fence_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/fence"
)

func nameSel(names ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: names}}}}}
}

func TestReachesOtherNodes(t *testing.T) {
	labelSel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: "fabric", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	for name, tc := range map[string]struct {
		alloc *resourcev1alpha2.AllocationResult
		want  bool
	}{
		"no allocation":        {nil, false},
		"one node":             {&resourcev1alpha2.AllocationResult{AvailableOnNodes: nameSel("n1")}, false},
		"two nodes":            {&resourcev1alpha2.AllocationResult{AvailableOnNodes: nameSel("n1", "n2")}, true},
		"label selector":       {&resourcev1alpha2.AllocationResult{AvailableOnNodes: labelSel}, true},
		"everywhere (nil sel)": {&resourcev1alpha2.AllocationResult{}, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := fence.AllocationReachesOtherNodes(tc.alloc); got != tc.want {
				t.Errorf("AllocationReachesOtherNodes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAllocationV1ReachesOtherNodes(t *testing.T) {
	dev := resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Request: "r", Driver: "d", Pool: "p", Device: "x"}}}
	one := &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchFields: []k8scorev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}
	for name, tc := range map[string]struct {
		alloc *resourcev1.AllocationResult
		want  bool
	}{
		"no allocation": {nil, false},
		"no devices":    {&resourcev1.AllocationResult{}, false},
		"one node":      {&resourcev1.AllocationResult{Devices: dev, NodeSelector: one}, false},
		"all nodes":     {&resourcev1.AllocationResult{Devices: dev}, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := fence.AllocationV1ReachesOtherNodes(tc.alloc); got != tc.want {
				t.Errorf("AllocationV1ReachesOtherNodes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFenceAfterAndOptIn(t *testing.T) {
	for v, want := range map[string]time.Duration{"20s": 20 * time.Second, "500ms": 500 * time.Millisecond, "0s": 0, "-1s": 0, "x": 0} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{fence.AnnotationSelfFenceAfter: v}}}
		got, ok := fence.FenceAfter(n)
		if got != want || ok != (want > 0) {
			t.Errorf("FenceAfter(%q) = %v, %v; want %v", v, got, ok, want)
		}
	}
	if _, ok := fence.FenceAfter(&corev1.Node{}); ok {
		t.Error("a node without the annotation records a fence time")
	}
	for v, want := range map[string]bool{"true": true, "1": true, "false": false, "": false, "yes": false} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{fence.AnnotationPodFence: v}}}
		if got := fence.PodOptsIn(p); got != want {
			t.Errorf("PodOptsIn(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestLastHeartbeatAndActed(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
	if got := fence.LastHeartbeat(n, nil); !got.Equal(t0.Add(-time.Hour)) {
		t.Errorf("without heartbeats: %v, want the creation", got)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.NewTime(t0)}}
	renew := metav1.NewMicroTime(t0.Add(3 * time.Second))
	lease := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
	last := fence.LastHeartbeat(n, lease)
	if !last.Equal(renew.Time) {
		t.Errorf("LastHeartbeat = %v, want the lease's %v", last, renew.Time)
	}
	if acted, _ := fence.Acted(0, time.Second, last, last.Add(time.Hour)); acted {
		t.Error("a node without a fence time has acted")
	}
	acted, at := fence.Acted(20*time.Second, 5*time.Second, last, last.Add(25*time.Second))
	if acted || !at.Equal(last.Add(25*time.Second)) {
		t.Errorf("at exactly fence+margin: acted %v at %v", acted, at)
	}
	if acted, _ := fence.Acted(20*time.Second, 5*time.Second, last, last.Add(26*time.Second)); !acted {
		t.Error("past fence+margin: not acted")
	}
}
