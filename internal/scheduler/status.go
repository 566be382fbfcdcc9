package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// apiStatusWriter is podStatusWriter over the API.
type apiStatusWriter struct{ c *client.Client }

func (w apiStatusWriter) PatchStatus(ctx context.Context, ns, name string, pt types.PatchType, data []byte) error {
	_, err := w.c.Pods(ns).Patch(ctx, name, pt, data, "status")
	return err
}

func (w apiStatusWriter) GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return w.c.Pods(ns).Get(ctx, name)
}

// PodScheduledCondition returns the pod's PodScheduled condition, or nil.
func PodScheduledCondition(pod *corev1.Pod) *corev1.PodCondition {
	return podCondition(pod, corev1.PodScheduled)
}

// ClaimsAllocatedCondition returns the pod's ResourceClaimsAllocated
// condition (pods given a node by hand), or nil.
func ClaimsAllocatedCondition(pod *corev1.Pod) *corev1.PodCondition {
	return podCondition(pod, corev1.PodResourceClaimsAllocated)
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// setUnscheduled writes PodScheduled=False with reason and message, only
// when that changes the condition. The patch carries the pod's
// resourceVersion, so it cannot land on a pod that was bound meanwhile;
// on a conflict it re-reads the pod once.
func (s *Scheduler) setUnscheduled(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message}
	ns, name := pod.Namespace, pod.Name
	for attempt := 0; ; attempt++ {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			return nil
		}
		data, changed, err := conditionPatch(pod, cond, pod.ResourceVersion, metav1.NewTime(s.now()))
		if err != nil || !changed {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.APITimeout)
		err = s.status.PatchStatus(pctx, ns, name, types.StrategicMergePatchType, data)
		cancel()
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt > 0:
			return fmt.Errorf("patch status of pod %s/%s: %w", ns, name, err)
		}
		gctx, cancel := context.WithTimeout(ctx, s.cfg.APITimeout)
		pod, err = s.status.GetPod(gctx, ns, name)
		cancel()
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("read pod %s/%s: %w", ns, name, err)
		}
	}
}

// setClaimsCondition writes ResourceClaimsAllocated with status, reason
// and message unless pod (the latest copy the scheduler has) already says
// so. Only the scheduler writes this condition, and one attempt at a time
// per pod, so the patch has no resourceVersion precondition: a stale copy
// costs at most a write that changes nothing.
func (s *Scheduler) setClaimsCondition(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, message string) error {
	cond := corev1.PodCondition{Type: corev1.PodResourceClaimsAllocated, Status: status, Reason: reason, Message: message}
	data, changed, err := conditionPatch(pod, cond, "", metav1.NewTime(s.now()))
	if err != nil || !changed {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.APITimeout)
	defer cancel()
	if err := s.status.PatchStatus(pctx, pod.Namespace, pod.Name, types.StrategicMergePatchType, data); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// conditionPatch builds the strategic merge patch that sets cond (its
// type, status, reason and message); changed is false when the pod
// already says so. The transition time is kept while the status stays.
// A non-empty resourceVersion is a precondition of the patch.
func conditionPatch(pod *corev1.Pod, cond corev1.PodCondition, resourceVersion string, now metav1.Time) ([]byte, bool, error) {
	cur := podCondition(pod, cond.Type)
	if cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return nil, false, nil
	}
	cond.LastTransitionTime = now
	if cur != nil && cur.Status == cond.Status {
		cond.LastTransitionTime = cur.LastTransitionTime
	}
	patch := map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}}
	if resourceVersion != "" {
		patch["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, false, fmt.Errorf("encode condition patch: %w", err)
	}
	return data, true, nil
}
