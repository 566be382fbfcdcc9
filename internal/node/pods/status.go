package pods

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/runtime"
)

// Container waiting and pod reasons, as the kubelet spells them.
const (
	ReasonContainerCreating   = "ContainerCreating"
	ReasonPodInitializing     = "PodInitializing"
	ReasonCrashLoopBackOff    = "CrashLoopBackOff"
	ReasonCreateConfigError   = "CreateContainerConfigError"
	ReasonCreateError         = "CreateContainerError"
	ReasonRunError            = "RunContainerError"
	ReasonStatusUnknown       = "ContainerStatusUnknown"
	ReasonDeadlineExceeded    = "DeadlineExceeded"
	ReasonContainersNotInit   = "ContainersNotInitialized"
	ReasonContainersNotReady  = "ContainersNotReady"
	ReasonPodCompleted        = "PodCompleted"
	ReasonCompleted           = "Completed"
	ReasonError               = "Error"
	messageDeadlineExceeded   = "Pod was active on the node longer than the specified deadline"
	messageContainerVanished  = "The container could not be located in the runtime"
	exitCodeContainerVanished = 137
)

// apiTime converts a runtime time to the second precision the API keeps,
// so that a status read back compares equal to the one written.
func apiTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.Truncate(time.Second))
}

// terminatedState converts a runtime status of an exited container.
func terminatedState(st runtime.ContainerStatus, containerID string) *corev1.ContainerStateTerminated {
	reason := st.Reason
	if reason == "" {
		reason = ReasonCompleted
		if st.ExitCode != 0 {
			reason = ReasonError
		}
	}
	return &corev1.ContainerStateTerminated{
		ExitCode: st.ExitCode, Signal: st.Signal, Reason: reason, Message: st.Message,
		StartedAt: apiTime(st.StartedAt), FinishedAt: apiTime(st.FinishedAt), ContainerID: containerID,
	}
}

// podPhase computes the phase of a pod that has not finished for another
// reason (rejection, deadline), from its container statuses, as the
// kubelet does: Pending until the init containers succeeded and every
// container has started once; Running while any runs or will be
// restarted; then Succeeded or Failed by the exit codes and the restart
// policy. A container waiting with a last termination is restarting: it
// counts by that termination.
func podPhase(policy corev1.RestartPolicy, init, ctrs []corev1.ContainerStatus) corev1.PodPhase {
	for _, s := range init {
		t := s.State.Terminated
		switch {
		case t != nil && t.ExitCode == 0:
			continue
		case t != nil && policy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, s := range ctrs {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.LastTerminationState.Terminated != nil:
			stopped++
			if s.LastTerminationState.Terminated.ExitCode == 0 {
				succeeded++
			}
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0 || len(ctrs) == 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case policy == corev1.RestartPolicyAlways:
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	case policy == corev1.RestartPolicyOnFailure:
		return corev1.PodRunning
	}
	return corev1.PodFailed
}

// finalPhase is the phase of a pod whose containers were all stopped for
// good (deletion): Succeeded when every container ran and exited 0.
func finalPhase(init, ctrs []corev1.ContainerStatus) corev1.PodPhase {
	for _, s := range append(append([]corev1.ContainerStatus{}, init...), ctrs...) {
		if t := s.State.Terminated; t == nil || t.ExitCode != 0 {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

// podConditions computes the conditions the agent owns: Initialized,
// ContainersReady and Ready. Others (PodScheduled, conditions of other
// components) are kept as they are by mergeConditions.
func podConditions(phase corev1.PodPhase, init, ctrs []corev1.ContainerStatus) []corev1.PodCondition {
	var notInit, notReady []string
	for _, s := range init {
		if t := s.State.Terminated; t == nil || t.ExitCode != 0 {
			notInit = append(notInit, s.Name)
		}
	}
	for _, s := range ctrs {
		if !s.Ready {
			notReady = append(notReady, s.Name)
		}
	}
	initialized := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	if len(notInit) > 0 {
		initialized = corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse,
			Reason: ReasonContainersNotInit, Message: "containers with incomplete status: [" + strings.Join(notInit, " ") + "]"}
	}
	ready := corev1.PodCondition{Status: corev1.ConditionTrue}
	switch {
	case phase == corev1.PodSucceeded || phase == corev1.PodFailed:
		ready = corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonPodCompleted}
	case len(notReady) > 0:
		ready = corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady,
			Message: "containers with unready status: [" + strings.Join(notReady, " ") + "]"}
	}
	cr, pr := ready, ready
	cr.Type, pr.Type = corev1.ContainersReady, corev1.PodReady
	return []corev1.PodCondition{initialized, cr, pr}
}

// mergeConditions sets the owned conditions in cur, keeping others, and
// keeping lastTransitionTime of a condition whose status did not change.
func mergeConditions(cur, owned []corev1.PodCondition, now time.Time) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(cur)+len(owned))
	seen := map[corev1.PodConditionType]bool{}
	for _, c := range cur {
		i := conditionIndex(owned, c.Type)
		if i < 0 {
			out = append(out, c)
			continue
		}
		n := owned[i]
		n.LastProbeTime = c.LastProbeTime
		n.LastTransitionTime = c.LastTransitionTime
		if c.Status != n.Status || c.LastTransitionTime.IsZero() {
			n.LastTransitionTime = apiTime(now)
		}
		out = append(out, n)
		seen[n.Type] = true
	}
	for _, n := range owned {
		if !seen[n.Type] {
			n.LastTransitionTime = apiTime(now)
			out = append(out, n)
		}
	}
	return out
}

func conditionIndex(conds []corev1.PodCondition, t corev1.PodConditionType) int {
	for i, c := range conds {
		if c.Type == t {
			return i
		}
	}
	return -1
}

// crashLoopMessage is the kubelet's message for a container in back-off.
func crashLoopMessage(d time.Duration, container string, pod *corev1.Pod) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, container, pod.Name, pod.Namespace, pod.UID)
}
