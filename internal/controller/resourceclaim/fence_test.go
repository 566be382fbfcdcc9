package resourceclaim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// fenceNode builds the nodes of the fencing rule's table.
type fenceNode struct{ n *corev1.Node }

func makeFenceNode() *fenceNode {
	return &fenceNode{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
}

func (b *fenceNode) taint(key string, added time.Time) *fenceNode {
	t := metav1.NewTime(added)
	b.n.Spec.Taints = append(b.n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: &t})
	return b
}

func (b *fenceNode) view(fenceAfter time.Duration, last time.Time) NodeView {
	return NodeView{Node: b.n, FenceAfter: fenceAfter, LastHeartbeat: last}
}

func evictedPod(tolerationSeconds *int64) *corev1.Pod {
	p := makePod("p").obj()
	p.Spec.NodeName = "n1"
	del := metav1.NewTime(time.Unix(0, 0))
	p.DeletionTimestamp = &del
	p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: tolerationSeconds}}
	return p
}

func TestFencedRelease(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	secs := func(s int64) *int64 { return &s }
	const fence, margin = 20 * time.Second, 5 * time.Second
	long := now.Add(-time.Hour)          // a heartbeat long before fence + margin
	recent := now.Add(-10 * time.Second) // within fence + margin
	tests := map[string]struct {
		pod   *corev1.Pod
		node  NodeView
		multi bool
		want  Verdict
	}{
		"reachable node keeps":                              {evictedPod(secs(0)), makeFenceNode().view(fence, long), false, Verdict{Why: whyReachable}},
		"not-ready node keeps":                              {evictedPod(secs(0)), makeFenceNode().taint(corev1.TaintNodeNotReady, long).view(fence, long), false, Verdict{Why: whyReachable}},
		"unreachable, pod not deleted":                      {makePod("p").obj(), makeFenceNode().taint(corev1.TaintNodeUnreachable, long).view(fence, long), false, Verdict{Why: whyNotEvicted}},
		"unreachable, toleration running":                   {evictedPod(secs(300)), makeFenceNode().taint(corev1.TaintNodeUnreachable, now.Add(-time.Minute)).view(fence, long), false, Verdict{At: now.Add(4 * time.Minute), Why: whyToleration}},
		"unreachable, tolerated for ever":                   {evictedPod(nil), makeFenceNode().taint(corev1.TaintNodeUnreachable, long).view(fence, long), false, Verdict{Why: whyTolerates}},
		"unreachable, toleration out, node-local":           {evictedPod(secs(300)), makeFenceNode().taint(corev1.TaintNodeUnreachable, long).view(0, recent), false, Verdict{Release: true}},
		"unreachable, toleration out, multi, no fence time": {evictedPod(secs(300)), makeFenceNode().taint(corev1.TaintNodeUnreachable, long).view(0, long), true, Verdict{Why: whyNoFence}},
		"unreachable, toleration out, multi, fence not acted": {evictedPod(secs(300)), makeFenceNode().taint(corev1.TaintNodeUnreachable, long).view(fence, recent), true,
			Verdict{At: recent.Add(fence + margin), Why: whyFenceNotActed}},
		"unreachable, toleration out, multi, fence acted": {evictedPod(secs(300)), makeFenceNode().taint(corev1.TaintNodeUnreachable, long).view(fence, long), true, Verdict{Release: true}},
		"unreachable, pod gone, node-local":               {nil, makeFenceNode().taint(corev1.TaintNodeUnreachable, now).view(fence, recent), false, Verdict{Release: true}},
		"unreachable, pod gone, multi, fence not acted":   {nil, makeFenceNode().taint(corev1.TaintNodeUnreachable, now).view(fence, recent), true, Verdict{At: recent.Add(fence + margin), Why: whyFenceNotActed}},
		"out of service, node-local, pod running":         {makePod("p").obj(), makeFenceNode().taint(corev1.TaintNodeOutOfService, now).view(0, recent), false, Verdict{Release: true}},
		"out of service, multi, no fence time":            {nil, makeFenceNode().taint(corev1.TaintNodeOutOfService, now).view(0, long), true, Verdict{Why: whyNoFence}},
		"out of service, multi, fence not acted":          {nil, makeFenceNode().taint(corev1.TaintNodeOutOfService, now).view(fence, recent), true, Verdict{At: recent.Add(fence + margin), Why: whyFenceNotActed}},
		"out of service, multi, fence acted":              {nil, makeFenceNode().taint(corev1.TaintNodeOutOfService, now).view(fence, long), true, Verdict{Release: true}},
		"deleted, node-local":                             {nil, NodeView{Gone: true}, false, Verdict{Release: true}},
		"deleted, multi, no fence time":                   {nil, NodeView{Gone: true, LastHeartbeat: long}, true, Verdict{Why: whyNoFence}},
		"deleted, multi, fence not acted":                 {evictedPod(nil), NodeView{Gone: true, FenceAfter: fence, LastHeartbeat: recent}, true, Verdict{At: recent.Add(fence + margin), Why: whyFenceNotActed}},
		"deleted, multi, fence acted":                     {nil, NodeView{Gone: true, FenceAfter: fence, LastHeartbeat: long}, true, Verdict{Release: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := FencedRelease(tc.pod, tc.node, tc.multi, margin, now)
			if got.Release != tc.want.Release || !got.At.Equal(tc.want.At) || got.Why != tc.want.Why {
				t.Errorf("FencedRelease = %+v, want %+v", got, tc.want)
			}
		})
	}
}
