package pods

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

type admitFunc func(context.Context, *corev1.Pod) Admission

func (f admitFunc) Admit(ctx context.Context, p *corev1.Pod) Admission { return f(ctx, p) }

type releasingAdmitter struct {
	admitFunc
	released int
}

func (r *releasingAdmitter) Release(context.Context, *corev1.Pod) error { r.released++; return nil }

func TestAdmission(t *testing.T) {
	verdict := HoldPod("WaitingForClaims", "claim gpu is not allocated")
	asked := 0
	adm := &releasingAdmitter{admitFunc: func(context.Context, *corev1.Pod) Admission { asked++; return verdict }}
	h := newHarness(t, makePod("p").containers("c1", "c2").policy(corev1.RestartPolicyNever).obj(), func(c *Config) {
		c.Hooks.Admitters = []Admitter{adm}
	}).start()
	h.sync()
	wantCalls(t, h.rt.takeCalls())
	if asked != 1 {
		t.Fatalf("admitter asked %d times in one sync, want once", asked)
	}
	cs := h.status().ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "WaitingForClaims" {
		t.Fatalf("held state %+v", cs.State)
	}
	verdict = Admitted()
	h.clock.step(5 * time.Second)
	h.sync()
	wantCalls(t, h.rt.takeCalls(), "create c1/0", "start c1/0", "create c2/0", "start c2/0")
	h.rt.exit(t, "c1", 0)
	h.rt.exit(t, "c2", 0)
	h.sync()
	if adm.released != 1 {
		t.Fatalf("released %d times, want once after the pod finished", adm.released)
	}

	t.Run("reject", func(t *testing.T) {
		rej := admitFunc(func(context.Context, *corev1.Pod) Admission { return RejectPod("OutOfgpu", "no gpu left") })
		h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) { c.Hooks.Admitters = []Admitter{rej} }).start()
		h.sync()
		wantCalls(t, h.rt.takeCalls())
		st := h.status()
		wantPhase(t, st, corev1.PodFailed)
		if st.Reason != "OutOfgpu" || st.Message != "no gpu left" {
			t.Fatalf("reason %q message %q", st.Reason, st.Message)
		}
	})
}

type optionsFunc func(context.Context, *corev1.Pod, *corev1.Container) (ContainerOptions, error)

func (f optionsFunc) ContainerOptions(ctx context.Context, p *corev1.Pod, c *corev1.Container) (ContainerOptions, error) {
	return f(ctx, p, c)
}

func TestContainerSpecCarriesEnvAndOptions(t *testing.T) {
	pod := makePod("p").containers("c1").obj()
	pod.Annotations = map[string]string{"allot.dev/fake-exit-after": "1s"}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "GREETING", Value: "hello $(POD)"},
	}
	pod.Spec.Containers[0].Args = []string{"$(GREETING)"}
	opts := optionsFunc(func(context.Context, *corev1.Pod, *corev1.Container) (ContainerOptions, error) {
		return ContainerOptions{Env: []string{"GPU=0"}, CDIDevices: []string{"vendor.com/gpu=0"},
			Devices: []runtime.Device{{HostPath: "/dev/null", ContainerPath: "/dev/gpu0", Permissions: "rw"}}}, nil
	})
	h := newHarness(t, pod, func(c *Config) { c.Hooks.Configurers = []ContainerConfigurer{opts}; c.RootDir = t.TempDir() }).start()
	h.sync()
	var spec runtime.ContainerSpec
	for _, s := range h.rt.specs {
		spec = s
	}
	if !slices.Equal(spec.Env, []string{"POD=p", "GREETING=hello p", "GPU=0"}) || !slices.Equal(spec.Args, []string{"hello p"}) {
		t.Fatalf("env %q args %q", spec.Env, spec.Args)
	}
	if spec.Annotations["allot.dev/fake-exit-after"] != "1s" || len(spec.CDIDevices) != 1 || len(spec.Devices) != 1 {
		t.Fatalf("spec %+v", spec)
	}
	if want := podfiles.LogPath(h.cfg.RootDir, h.w.key, "c1", 0); spec.LogPath != want {
		t.Fatalf("log path %q, want %q", spec.LogPath, want)
	}
}

func TestReleaseAfterAdoption(t *testing.T) {
	adm := &releasingAdmitter{admitFunc: func(context.Context, *corev1.Pod) Admission { return Admitted() }}
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) { c.Hooks.Admitters = []Admitter{adm} })
	h.rt.add(runtime.ContainerStatus{ID: "cur", PodUID: "p-uid", Name: "c1", State: runtime.StateRunning, StartedAt: h.clock.now()})
	h.start()
	h.sync()
	h.w.Gone()
	h.w.takeMail()
	h.sync()
	if adm.released != 1 || !h.w.finished {
		t.Fatalf("released %d times (finished %v), want once for a pod that ran before the worker", adm.released, h.w.finished)
	}
}

// recordedEvents is an EventRecorder that keeps "TYPE REASON MESSAGE".
type recordedEvents struct{ list []string }

func (r *recordedEvents) Eventf(_ k8sruntime.Object, typ, reason, format string, args ...any) {
	r.list = append(r.list, typ+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (r *recordedEvents) with(prefix string) []string {
	var out []string
	for _, e := range r.list {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func TestHoldEventsWhenTheReasonChanges(t *testing.T) {
	verdict := HoldPod("WaitingForResourceClaim", "claim gpu is not allocated")
	adm := admitFunc(func(context.Context, *corev1.Pod) Admission { return verdict })
	events := &recordedEvents{}
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) {
		c.Hooks.Admitters = []Admitter{adm}
		c.Events = events
	}).start()
	h.sync()
	h.clock.step(5 * time.Second)
	h.sync() // same hold: no second event
	verdict = HoldPod("PrepareResourcesFailed", "driver said no")
	h.clock.step(5 * time.Second)
	h.sync()
	want := []string{
		"Warning WaitingForResourceClaim claim gpu is not allocated",
		"Warning PrepareResourcesFailed driver said no",
	}
	if got := events.with("Warning"); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestHeldPodIsReleasedWhenDeleted(t *testing.T) {
	adm := &releasingAdmitter{admitFunc: func(context.Context, *corev1.Pod) Admission {
		return HoldPod("WaitingForResourceClaim", "claim gpu is not reserved")
	}}
	h := newHarness(t, makePod("p").containers("c1").obj(), func(c *Config) { c.Hooks.Admitters = []Admitter{adm} }).start()
	h.sync()
	h.w.Gone()
	h.w.takeMail()
	h.sync()
	if adm.released != 1 || !h.w.finished {
		t.Fatalf("released %d times (finished %v), want once: an admitter may have acquired resources for a held pod", adm.released, h.w.finished)
	}
}
