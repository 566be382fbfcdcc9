package pods

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// Container status builders for phase tables.
func running() corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Ready: true}
}

func waiting() corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}}
}

func exited(code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
}

func restarting(code int32) corev1.ContainerStatus {
	s := waiting()
	s.State.Waiting.Reason = ReasonCrashLoopBackOff
	s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: code}
	return s
}

func statuses(s ...corev1.ContainerStatus) []corev1.ContainerStatus { return s }

func TestPodPhase(t *testing.T) {
	const (
		always    = corev1.RestartPolicyAlways
		onFailure = corev1.RestartPolicyOnFailure
		never     = corev1.RestartPolicyNever
	)
	tests := map[string]struct {
		policy     corev1.RestartPolicy
		init, ctrs []corev1.ContainerStatus
		want       corev1.PodPhase
	}{
		"init running":                 {always, statuses(running()), statuses(waiting()), corev1.PodPending},
		"init failed, Never":           {never, statuses(exited(1)), statuses(waiting()), corev1.PodFailed},
		"init failed, OnFailure":       {onFailure, statuses(restarting(1)), statuses(waiting()), corev1.PodPending},
		"init done, container waiting": {always, statuses(exited(0)), statuses(waiting()), corev1.PodPending},
		"all running":                  {always, nil, statuses(running(), running()), corev1.PodRunning},
		"one waiting":                  {always, nil, statuses(running(), waiting()), corev1.PodPending},
		"Always, all exited":           {always, nil, statuses(exited(0)), corev1.PodRunning},
		"Always, restarting":           {always, nil, statuses(restarting(1)), corev1.PodRunning},
		"OnFailure, all succeeded":     {onFailure, nil, statuses(exited(0), exited(0)), corev1.PodSucceeded},
		"OnFailure, restarting":        {onFailure, nil, statuses(exited(0), restarting(2)), corev1.PodRunning},
		"Never, all succeeded":         {never, nil, statuses(exited(0)), corev1.PodSucceeded},
		"Never, one failed":            {never, nil, statuses(exited(0), exited(1)), corev1.PodFailed},
		"Never, one still running":     {never, nil, statuses(exited(1), running()), corev1.PodRunning},
		"no containers":                {always, nil, nil, corev1.PodPending},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := podPhase(tc.policy, tc.init, tc.ctrs); got != tc.want {
				t.Fatalf("podPhase = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFinalPhase(t *testing.T) {
	if got := finalPhase(statuses(exited(0)), statuses(exited(0))); got != corev1.PodSucceeded {
		t.Fatalf("all exited 0: %s", got)
	}
	if got := finalPhase(nil, statuses(exited(0), exited(143))); got != corev1.PodFailed {
		t.Fatalf("killed: %s", got)
	}
	if got := finalPhase(nil, statuses(waiting())); got != corev1.PodFailed {
		t.Fatalf("never ran: %s", got)
	}
}

func TestMergeConditionsKeepsTransitionTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	cur := []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
	}
	owned := podConditions(corev1.PodRunning, nil, statuses(running()))
	got := mergeConditions(cur, owned, t1)
	want := map[corev1.PodConditionType]time.Time{
		corev1.PodScheduled: t0, corev1.PodReady: t0, corev1.ContainersReady: t1, corev1.PodInitialized: t1,
	}
	if len(got) != len(want) {
		t.Fatalf("conditions %+v", got)
	}
	for _, c := range got {
		if !c.LastTransitionTime.Time.Equal(want[c.Type]) {
			t.Errorf("%s lastTransitionTime %v, want %v", c.Type, c.LastTransitionTime, want[c.Type])
		}
	}
}
