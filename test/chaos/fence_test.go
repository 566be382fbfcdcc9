package chaos

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	nodeagent "allot.dev/allot/internal/node"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestReasonFencedIsTheAgents(t *testing.T) {
	if reasonFenced != nodeagent.ReasonFenced {
		t.Fatalf("the harness looks for reason %q, the agent writes %q", reasonFenced, nodeagent.ReasonFenced)
	}
}

// fencedPod is a pod its node's fence stopped; optIn sets allot.dev/fence.
func fencedPod(name string, uid types.UID, optIn string) corev1.Pod {
	p := runningPod(name, uid, "c-"+name)
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, reasonFenced
	if optIn != "" {
		p.Annotations = map[string]string{"allot.dev/fence": optIn}
	}
	return p
}

// onNodes makes a v1alpha2 claim's allocation available on the nodes
// sel selects (nil: every node).
func onNodes(c resourcev1alpha2.ResourceClaim, sel *corev1.NodeSelector) resourcev1alpha2.ResourceClaim {
	c.Status.Allocation.AvailableOnNodes = sel
	return c
}

func oneNode(name string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}}}
}

func TestCheckFenceSpared(t *testing.T) {
	labelled := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "fabric", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	v1Everywhere := v1Reserved(v1Allocated("v", "n1", "gpu-0"), "p1")
	v1Everywhere.Status.Allocation.NodeSelector = nil
	v1Local := v1Reserved(v1Allocated("v", "n1", "gpu-0"), "p1")
	v1Local.Status.Allocation.NodeSelector = &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{MatchFields: []k8scorev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}
	for name, tc := range map[string]struct {
		pods   []corev1.Pod
		claims Claims
		want   int
	}{
		"node-local claim fenced": {pods: []corev1.Pod{fencedPod("a", "p1", "")},
			claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{reserved(onNodes(allocated("c", "n1", "gpu-0"), oneNode("n1")), "p1")}}, want: 1},
		"node-local v1 claim fenced": {pods: []corev1.Pod{fencedPod("a", "p1", "")},
			claims: Claims{V1: []resourcev1.ResourceClaim{v1Local}}, want: 1},
		"no claim seen, fenced": {pods: []corev1.Pod{fencedPod("a", "p1", "")}, want: 1},
		"opt-in not a boolean":  {pods: []corev1.Pod{fencedPod("a", "p1", "yes please")}, want: 1},
		"opted in":              {pods: []corev1.Pod{fencedPod("a", "p1", "true")}},
		"failed for another reason": {pods: []corev1.Pod{func() corev1.Pod {
			p := fencedPod("a", "p1", "")
			p.Status.Reason = "DeviceUnhealthy"
			return p
		}()}},
		"claim on every node": {pods: []corev1.Pod{fencedPod("a", "p1", "")},
			claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{reserved(allocated("c", "n1", "gpu-0"), "p1")}}},
		"claim on labelled nodes": {pods: []corev1.Pod{fencedPod("a", "p1", "")},
			claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{reserved(onNodes(allocated("c", "n1", "gpu-0"), labelled), "p1")}}},
		"v1 claim on every node": {pods: []corev1.Pod{fencedPod("a", "p1", "")},
			claims: Claims{V1: []resourcev1.ResourceClaim{v1Everywhere}}},
		"multi-node claim of another pod": {pods: []corev1.Pod{fencedPod("a", "p1", "")},
			claims: Claims{V1alpha2: []resourcev1alpha2.ResourceClaim{reserved(allocated("c", "n1", "gpu-0"), "p2")}}, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := CheckFenceSpared(tc.pods, MultiNodePods(tc.claims)); len(got) != tc.want {
				t.Fatalf("got %v, want %d violations", got, tc.want)
			}
		})
	}
}
