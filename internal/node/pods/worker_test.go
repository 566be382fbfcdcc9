package pods

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("runtime calls:\n got  %q\n want %q", got, want)
	}
}

func wantPhase(t *testing.T, st corev1.PodStatus, want corev1.PodPhase) {
	t.Helper()
	if st.Phase != want {
		t.Fatalf("phase = %s, want %s (status %+v)", st.Phase, want, st)
	}
}

func condition(st corev1.PodStatus, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestInitContainersThenContainersInOrder(t *testing.T) {
	h := newHarness(t, makePod("p").init("i1", "i2").containers("c1", "c2").obj()).start()
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create i1/0", "start i1/0")
	wantPhase(t, h.status(), corev1.PodPending)
	if c := condition(h.status(), corev1.PodInitialized); c.Status != corev1.ConditionFalse {
		t.Fatalf("Initialized = %+v, want False", c)
	}
	if w := h.status().ContainerStatuses[0].State.Waiting; w == nil || w.Reason != ReasonPodInitializing {
		t.Fatalf("c1 state = %+v, want waiting PodInitializing", h.status().ContainerStatuses[0].State)
	}

	h.sync()
	wantCalls(t, h.rt.takeCalls()) // i1 still runs

	h.rt.exit(t, "i1", 0)
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create i2/0", "start i2/0")

	h.rt.exit(t, "i2", 0)
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create c1/0", "start c1/0", "create c2/0", "start c2/0")
	st := h.status()
	wantPhase(t, st, corev1.PodRunning)
	for _, typ := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		if c := condition(st, typ); c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", typ, c)
		}
	}
	if st.PodIP != "10.0.0.1" || st.HostIP != "10.0.0.1" || st.StartTime == nil {
		t.Errorf("podIP %q hostIP %q startTime %v", st.PodIP, st.HostIP, st.StartTime)
	}
}

func TestFailedInitContainerWithNeverFailsPod(t *testing.T) {
	h := newHarness(t, makePod("p").init("i1").containers("c1").policy(corev1.RestartPolicyNever).obj()).start()
	h.sync()
	h.rt.takeCalls()
	h.rt.exit(t, "i1", 2)
	h.sync()
	wantCalls(t, h.rt.takeCalls())
	wantPhase(t, h.status(), corev1.PodFailed)
}

func TestRestartPolicies(t *testing.T) {
	tests := map[string]struct {
		policy      corev1.RestartPolicy
		exit        int32
		wantRestart bool
		wantPhase   corev1.PodPhase
	}{
		"Always restarts success": {corev1.RestartPolicyAlways, 0, true, corev1.PodRunning},
		"Always restarts failure": {corev1.RestartPolicyAlways, 1, true, corev1.PodRunning},
		"OnFailure keeps success": {corev1.RestartPolicyOnFailure, 0, false, corev1.PodSucceeded},
		"OnFailure restarts fail": {corev1.RestartPolicyOnFailure, 1, true, corev1.PodRunning},
		"Never keeps success":     {corev1.RestartPolicyNever, 0, false, corev1.PodSucceeded},
		"Never keeps failure":     {corev1.RestartPolicyNever, 1, false, corev1.PodFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, makePod("p").containers("c1").policy(tc.policy).obj()).start()
			h.sync()
			h.rt.takeCalls()
			h.rt.exit(t, "c1", tc.exit)
			h.sync()
			wantPhase(t, h.status(), tc.wantPhase)
			h.clock.step(10 * time.Second)
			h.sync()
			restarted := slices.Contains(h.rt.takeCalls(), "start c1/1")
			if restarted != tc.wantRestart {
				t.Fatalf("restarted = %v, want %v", restarted, tc.wantRestart)
			}
		})
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj()).start()
	h.sync()
	h.rt.takeCalls()
	// Delays 10s, 20s, 40s, 40s (max).
	for i, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second} {
		h.rt.exit(t, "c1", 1)
		next := h.sync()
		if want := h.clock.now().Add(delay); !next.Equal(want) {
			t.Fatalf("restart %d: next wake %v, want %v", i+1, next, want)
		}
		cs := h.status().ContainerStatuses[0]
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != ReasonCrashLoopBackOff {
			t.Fatalf("restart %d: state %+v, want waiting CrashLoopBackOff", i+1, cs.State)
		}
		if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
			t.Fatalf("restart %d: lastState %+v", i+1, cs.LastTerminationState)
		}
		h.clock.step(delay - time.Second)
		h.sync()
		wantCalls(t, h.rt.takeCalls()) // still backing off
		h.clock.step(time.Second)
		h.sync()
		wantCalls(t, h.rt.takeCalls(), "remove c1/"+itoa(i), "create c1/"+itoa(i+1), "start c1/"+itoa(i+1))
		cs = h.status().ContainerStatuses[0]
		if cs.State.Running == nil || cs.RestartCount != int32(i+1) {
			t.Fatalf("restart %d: status %+v", i+1, cs)
		}
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestNextBackoff(t *testing.T) {
	const initial, maxD = 10 * time.Second, 5 * time.Minute
	tests := map[string]struct {
		prev, ran, want time.Duration
	}{
		"first":               {0, time.Second, initial},
		"doubles":             {initial, time.Second, 2 * initial},
		"capped":              {4 * time.Minute, time.Second, maxD},
		"reset after healthy": {maxD, 10 * time.Minute, initial},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nextBackoff(tc.prev, tc.ran, initial, maxD); got != tc.want {
				t.Fatalf("nextBackoff = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestGracefulDeletionStopsWithGrace(t *testing.T) {
	tests := map[string]struct {
		deletionGrace int64
		maxGrace      time.Duration
		want          string
	}{
		"deletion grace shorter": {5, 0, "5s"},
		"pod grace shorter":      {60, 0, "30s"},
		"capped":                 {20, 2 * time.Second, "2s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, makePod("p").containers("c1", "c2").obj(), func(c *Config) { c.Timing.MaxGracePeriod = tc.maxGrace }).start()
			h.sync()
			h.rt.takeCalls()
			h.update()
			pod := h.api.modify(func(p *corev1.Pod) {
				now := metav1.NewTime(h.clock.now())
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &tc.deletionGrace
			})
			h.w.Update(pod)
			h.w.takeMail()
			h.sync()
			calls := h.rt.takeCalls()
			slices.Sort(calls[:2]) // stopped in parallel
			wantCalls(t, calls, "stop c1/0 grace="+tc.want, "stop c2/0 grace="+tc.want, "remove c1/0", "remove c2/0")
			if !h.w.finished {
				t.Fatal("worker did not finish")
			}
			if len(h.api.deleted) != 1 || h.api.deleted[0] != "p-uid" {
				t.Fatalf("deletions = %v, want one with the pod's UID", h.api.deleted)
			}
		})
	}
}

func TestDeletionWritesFinalStatusFirst(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj()).start()
	h.sync()
	pod := h.deleting(1)
	// Keep a copy of the status the worker wrote before the delete.
	var final corev1.PodStatus
	h.w.cfg.API = &recordingAPI{API: h.api, onDelete: func() { final = h.api.get().Status }}
	h.w.Update(pod)
	h.w.takeMail()
	h.sync()
	if final.Phase != corev1.PodFailed || final.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("status before delete = %+v, want Failed with a terminated container", final)
	}
}

// A deleted pod's resources are released before its terminal status is
// written: the scheduler frees them as soon as it sees that status.
func TestDeletionReleasesBeforeFinalStatus(t *testing.T) {
	var phaseAtRelease corev1.PodPhase
	var api *fakeAPI
	adm := &releasingAdmitter{admitFunc: func(context.Context, *corev1.Pod) Admission { return Admitted() }}
	rec := &phaseRecorder{releasingAdmitter: adm, phase: func() corev1.PodPhase { return api.get().Status.Phase }, at: &phaseAtRelease}
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) { c.Hooks.Admitters = []Admitter{rec} })
	api = h.api
	h.start()
	h.sync()
	pod := h.deleting(1)
	h.w.Update(pod)
	h.w.takeMail()
	h.sync()
	if adm.released != 1 {
		t.Fatalf("released %d times, want once", adm.released)
	}
	if phaseAtRelease == corev1.PodFailed || phaseAtRelease == corev1.PodSucceeded {
		t.Fatalf("the API showed the pod %s when its resources were released", phaseAtRelease)
	}
}

// phaseRecorder notes the pod's phase in the API when it is released.
type phaseRecorder struct {
	*releasingAdmitter
	phase func() corev1.PodPhase
	at    *corev1.PodPhase
}

func (r *phaseRecorder) Release(ctx context.Context, p *corev1.Pod) error {
	*r.at = r.phase()
	return r.releasingAdmitter.Release(ctx, p)
}

type recordingAPI struct {
	API
	onDelete func()
}

func (r *recordingAPI) DeletePod(ctx context.Context, ns, name string, uid types.UID) error {
	r.onDelete()
	return r.API.DeletePod(ctx, ns, name, uid)
}

func TestPodGoneStopsContainersWithoutAPIWrites(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj()).start()
	h.sync()
	h.rt.takeCalls()
	writes := h.api.writes
	h.w.Gone()
	h.w.takeMail()
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "stop c1/0 grace=30s", "remove c1/0")
	if h.api.writes != writes || len(h.api.deleted) != 0 {
		t.Fatalf("API writes %d→%d, deletions %v: want none for a gone pod", writes, h.api.writes, h.api.deleted)
	}
}

func TestAdoptionKeepsRunningContainers(t *testing.T) {
	started := time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC)
	h := newHarness(t, makePod("p").containers("c1").obj())
	h.rt.add(runtime.ContainerStatus{ID: "old", PodUID: "p-uid", Name: "c1", Attempt: 1, State: runtime.StateExited, ExitCode: 3,
		StartedAt: started.Add(-time.Minute), FinishedAt: started})
	h.rt.add(runtime.ContainerStatus{ID: "cur", PodUID: "p-uid", Name: "c1", Attempt: 2, State: runtime.StateRunning, StartedAt: started})
	h.rt.add(runtime.ContainerStatus{ID: "stray", PodUID: "p-uid", Name: "gone", Attempt: 0, State: runtime.StateExited})
	h.start()
	h.sync()
	calls := h.rt.takeCalls()
	slices.Sort(calls)
	wantCalls(t, calls, "remove c1/1", "remove gone/0")
	cs := h.status().ContainerStatuses[0]
	if cs.State.Running == nil || !cs.State.Running.StartedAt.Time.Equal(started) || cs.RestartCount != 2 {
		t.Fatalf("adopted status %+v, want running since %v with 2 restarts", cs, started)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 {
		t.Fatalf("last state %+v, want the previous attempt's exit 3", cs.LastTerminationState)
	}
	if cs.ContainerID != "fake://cur" {
		t.Fatalf("containerID %q", cs.ContainerID)
	}
}

func TestFinishedPodsAreNotRerun(t *testing.T) {
	t.Run("checkpoint", func(t *testing.T) {
		root := t.TempDir()
		pod := makePod("p").init("i1").containers("c1").obj()
		key := podfiles.PodKey{Namespace: "ns", Name: "p", UID: "p-uid"}
		cp := podfiles.Checkpoint{Phase: corev1.PodSucceeded, Done: map[string]podfiles.Finished{
			"i1": {ExitCode: 0}, "c1": {ExitCode: 0, Attempt: 1},
		}}
		if err := podfiles.SaveCheckpoint(root, key, cp); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, pod, func(c *Config) { c.RootDir = root }).start()
		h.sync()
		wantCalls(t, h.rt.takeCalls())
		st := h.status()
		wantPhase(t, st, corev1.PodSucceeded)
		if cs := st.ContainerStatuses[0]; cs.State.Terminated == nil || cs.RestartCount != 1 {
			t.Fatalf("status from checkpoint %+v", cs)
		}
	})
	t.Run("API phase", func(t *testing.T) {
		pod := makePod("p").containers("c1").obj()
		pod.Status.Phase = corev1.PodFailed
		h := newHarness(t, pod).start()
		h.sync()
		wantCalls(t, h.rt.takeCalls())
		if h.api.writes != 0 {
			t.Fatalf("status writes = %d, want none for a pod finished before the worker", h.api.writes)
		}
	})
	t.Run("completed init container", func(t *testing.T) {
		root := t.TempDir()
		h := newHarness(t, makePod("p").init("i1").containers("c1").obj(), func(c *Config) { c.RootDir = root }).start()
		h.sync()
		h.rt.exit(t, "i1", 0)
		h.sync()
		wantCalls(t, h.rt.takeCalls(), "create i1/0", "start i1/0", "create c1/0", "start c1/0")
		// A new agent after a reboot: the runtime lost every container.
		h.rt = newFakeRuntime(h.clock.now)
		h.cfg.Runtime = h.rt
		h.start()
		h.sync()
		wantCalls(t, h.rt.takeCalls(), "create c1/0", "start c1/0")
	})
}

func TestFinishedPodContainersRemovedLater(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").policy(corev1.RestartPolicyNever).obj()).start()
	h.sync()
	h.rt.exit(t, "c1", 0)
	next := h.sync()
	h.rt.takeCalls()
	if want := h.clock.now().Add(time.Minute); !next.Equal(want) {
		t.Fatalf("next wake %v, want cleanup at %v", next, want)
	}
	h.clock.step(time.Minute)
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "remove c1/0")
	st := h.status()
	wantPhase(t, st, corev1.PodSucceeded)
	if st.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("status lost after cleanup: %+v", st.ContainerStatuses[0])
	}
}

func TestStatusWrittenOnlyOnChange(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj()).start()
	h.sync()
	writes := h.api.writes
	for range 5 {
		h.clock.step(3 * time.Second)
		h.update()
		h.sync()
	}
	if h.api.writes != writes {
		t.Fatalf("status writes %d→%d without changes", writes, h.api.writes)
	}
}

func TestStatusConflictKeepsOthersFields(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj()).start()
	h.sync()
	h.api.modify(func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "ResourceClaimsUnprepared", Status: corev1.ConditionFalse})
	})
	h.rt.exit(t, "c1", 1) // a change to write, from a stale resourceVersion
	h.sync()
	st := h.status()
	if c := condition(st, "ResourceClaimsUnprepared"); c.Status != corev1.ConditionFalse {
		t.Fatalf("foreign condition lost: %+v", st.Conditions)
	}
	if st.ContainerStatuses[0].LastTerminationState.Terminated == nil {
		t.Fatalf("status not written after conflict: %+v", st.ContainerStatuses[0])
	}
}

func TestCreateErrorRetriedWithBackoff(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj()).start()
	h.rt.createErr["c1"] = errors.New("unknown image busybox")
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create-failed c1")
	cs := h.status().ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != ReasonCreateError {
		t.Fatalf("state %+v, want waiting %s", cs.State, ReasonCreateError)
	}
	wantPhase(t, h.status(), corev1.PodPending)
	delete(h.rt.createErr, "c1")
	h.sync()
	wantCalls(t, h.rt.takeCalls())
	h.clock.step(10 * time.Second)
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create c1/0", "start c1/0")
}

func TestActiveDeadline(t *testing.T) {
	pod := makePod("p").containers("c1").obj()
	d := int64(60)
	pod.Spec.ActiveDeadlineSeconds = &d
	h := newHarness(t, pod).start()
	h.sync()
	h.rt.takeCalls()
	h.clock.step(61 * time.Second)
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "stop c1/0 grace=30s")
	st := h.status()
	wantPhase(t, st, corev1.PodFailed)
	if st.Reason != ReasonDeadlineExceeded {
		t.Fatalf("reason %q", st.Reason)
	}
}

func TestRunLoopEndsAfterDeletion(t *testing.T) {
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) { c.Now = time.Now }).start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go h.w.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for h.api.get().Status.Phase != corev1.PodRunning {
		if time.Now().After(deadline) {
			t.Fatal("pod did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	grace := int64(0)
	pod := h.api.modify(func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	})
	h.w.Update(pod)
	select {
	case <-h.w.Done():
	case <-ctx.Done():
		t.Fatal("worker did not end after the deletion")
	}
	if len(h.api.deleted) != 1 {
		t.Fatalf("deletions %v", h.api.deleted)
	}
}

// retryAfterErr is a Release error that names its next attempt.
type retryAfterErr struct {
	at      time.Time
	waiting bool
}

func (e retryAfterErr) Error() string      { return "driver gone" }
func (e retryAfterErr) RetryAt() time.Time { return e.at }
func (e retryAfterErr) BackingOff() bool   { return e.waiting }

// blockedReleaser fails Release with err until err is nil.
type blockedReleaser struct {
	admitFunc
	err   error
	calls int
}

func (b *blockedReleaser) Release(context.Context, *corev1.Pod) error { b.calls++; return b.err }

// TestReleaseWaitsForTheReleasersBackoff: a deletion blocked by a Release
// that names its next attempt is synced again then, not every Retry; once
// Release succeeds, the deletion completes.
func TestReleaseWaitsForTheReleasersBackoff(t *testing.T) {
	rel := &blockedReleaser{admitFunc: func(context.Context, *corev1.Pod) Admission { return Admitted() }}
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) { c.Hooks.Admitters = []Admitter{rel} })
	h.start()
	h.sync()
	retryAt := h.clock.now().Add(time.Minute)
	rel.err = retryAfterErr{at: retryAt}
	pod := h.deleting(1)
	h.w.Update(pod)
	h.w.takeMail()
	if next := h.sync(); !next.Equal(retryAt) {
		t.Fatalf("next sync at %v, want the releaser's retry time %v", next, retryAt)
	}
	if len(h.api.deleted) != 0 {
		t.Fatal("deletion completed while Release failed")
	}
	rel.err = nil
	h.clock.step(time.Minute)
	h.sync()
	if len(h.api.deleted) != 1 {
		t.Fatalf("deletion not completed once Release succeeded (release calls %d)", rel.calls)
	}
}
