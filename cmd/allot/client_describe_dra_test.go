package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// describe pod shows the pod's claims' state and its PodSchedulingContext.
func TestDescribePodShowsClaimsAndSchedulingContext(t *testing.T) {
	ns := applyFixture(t, "describe-dra")
	c, ctx := newTestClient(t), testCtx(t)
	claim := "gpu"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "negotiating", Namespace: ns}, Spec: corev1.PodSpec{
		SchedulerName:  "nobody",
		Containers:     []corev1.Container{{Name: "c", Image: "busybox"}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "net", ResourceClaimName: &claim}},
	}}
	pod, err := c.Pods(ns).Create(ctx, pod)
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	sc := &resourcev1alpha2.PodSchedulingContext{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: resourcev1alpha2.PodSchedulingContextSpec{SelectedNode: "n2", PotentialNodes: []string{"n1", "n2"}}}
	if sc, err = c.PodSchedulingContexts(ns).Create(ctx, sc); err != nil {
		t.Fatalf("create context: %v", err)
	}
	sc.Status.ResourceClaims = []resourcev1alpha2.ResourceClaimSchedulingStatus{{Name: "net", UnsuitableNodes: []string{"n1"}}}
	if _, err := c.PodSchedulingContexts(ns).UpdateStatus(ctx, sc); err != nil {
		t.Fatalf("update context status: %v", err)
	}
	out := allot(t, "describe", "pod", "negotiating", "-n", ns)
	for _, want := range []string{
		"Claim Status:\n", "gpu:", "not allocated, reserved for <none>",
		"PodSchedulingContext:\n", "Selected Node:", "n2\n", "Potential Nodes:", "n1, n2\n", "Unsuitable for net:", "n1\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe output lacks %q:\n%s", want, out)
		}
	}
}
