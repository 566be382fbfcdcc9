package main

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	corev1 "allot.dev/allot/api/core/v1"
)

// describePodDRA shows, for a pod with claims, the state of each claim
// (allocated by whom, reserved for whom, deallocation requested) and its
// PodSchedulingContext (seed 003: describe the pod, its claims, its
// scheduling context, in this order).
func describePodDRA(ctx context.Context, s *session, w *describeWriter, u *unstructured.Unstructured) {
	var pod corev1.Pod
	if err := fromUnstructured(u, &pod); err != nil || !pod.UsesResourceClaims() {
		return
	}
	w.line(0, "Claim Status:")
	for _, name := range pod.ResourceClaimNames() {
		c, err := s.c.ResourceClaims(pod.Namespace).Get(ctx, name)
		if err != nil {
			w.line(1, "%s:\t<%v>", name, err)
			continue
		}
		st := "not allocated"
		if a := c.Status.Allocation; a != nil {
			by := c.Status.DriverName
			if c.Status.ControllerName != "" {
				by = "controller " + c.Status.ControllerName
			}
			st = "allocated by " + by
		}
		var users []string
		for _, r := range c.Status.ReservedFor {
			users = append(users, r.Resource+"/"+r.Name)
		}
		st += ", reserved for " + orNone(strings.Join(users, ", "))
		if c.Status.DeallocationRequested {
			st += ", deallocation requested"
		}
		if c.DeletionTimestamp != nil {
			st += ", being deleted"
		}
		w.line(1, "%s:\t%s", name, st)
	}
	sc, err := s.c.PodSchedulingContexts(pod.Namespace).Get(ctx, pod.Name)
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		w.line(0, "PodSchedulingContext:\t<%v>", err)
		return
	}
	w.line(0, "PodSchedulingContext:")
	w.line(1, "Selected Node:\t%s", orNone(sc.Spec.SelectedNode))
	w.line(1, "Potential Nodes:\t%s", orNone(strings.Join(sc.Spec.PotentialNodes, ", ")))
	for _, rc := range sc.Status.ResourceClaims {
		w.line(1, "Unsuitable for %s:\t%s", rc.Name, orNone(strings.Join(rc.UnsuitableNodes, ", ")))
	}
}
