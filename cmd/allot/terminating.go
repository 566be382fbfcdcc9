package main

import (
	"fmt"
	"io"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
)

// terminating describes a pod being deleted: since when, and what its
// deletion waits for when the node agent said (the condition
// ResourceClaimsUnprepared=False: a DRA driver that is not registered, or
// an unprepare that fails), with what the user can do. ok is false for a
// pod that is not being deleted.
func terminating(pod *corev1.Pod, now time.Time) (summary, blocker string, ok bool) {
	ts := pod.DeletionTimestamp
	if ts == nil {
		return "", "", false
	}
	summary = fmt.Sprintf("Terminating since %s (%s ago)", ts.UTC().Format(time.RFC3339), now.Sub(ts.Time).Round(time.Second))
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResourceClaimsUnprepared && c.Status == corev1.ConditionFalse {
			blocker = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	return summary, blocker, true
}

// writeTerminating prints the pod's deletion and what blocks it, for
// allot explain; it reports whether the pod is being deleted.
func writeTerminating(w io.Writer, pod *corev1.Pod) bool {
	summary, blocker, ok := terminating(pod, time.Now())
	if !ok {
		return false
	}
	fmt.Fprintf(w, "pod %s/%s: %s on node %s.\n", pod.Namespace, pod.Name, summary, orNone(pod.Spec.NodeName))
	switch {
	case blocker != "":
		fmt.Fprintf(w, "Its deletion waits: %s\n", blocker)
	case pod.Spec.NodeName != "":
		fmt.Fprintf(w, "Its node agent is stopping its containers and releasing its devices; if that does not end, "+
			"check the node (allot get node %s) and its agent's log.\n", pod.Spec.NodeName)
	}
	fmt.Fprintf(w, "To remove it from the API at once: allot delete pod %s -n %s --force "+
		"(what the node still holds is released when its agent or driver returns).\n", pod.Name, pod.Namespace)
	return true
}
