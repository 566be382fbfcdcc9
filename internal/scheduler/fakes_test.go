package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// fakeCluster stands in for the API server and the informers: it binds
// pods, patches their status and tells the scheduler's handlers, as the
// informers would.
type fakeCluster struct {
	s *Scheduler

	mu       sync.Mutex
	pods     map[string]*corev1.Pod // by name
	bindings map[string]*corev1.Binding
	patches  int
	events   []string // "reason: message"
	rv       int

	// bindHook, if set, runs before a bind and may fail it.
	bindHook func(ctx context.Context, pod string) error
}

func (f *fakeCluster) nextRV() string { f.rv++; return fmt.Sprint(f.rv) }

func (f *fakeCluster) addPod(p *corev1.Pod) {
	f.mu.Lock()
	p = p.DeepCopy()
	p.ResourceVersion = f.nextRV()
	f.pods[p.Name] = p
	f.mu.Unlock()
	f.s.onPodAdd(p)
}

func (f *fakeCluster) deletePod(name string) {
	f.mu.Lock()
	p := f.pods[name]
	delete(f.pods, name)
	f.mu.Unlock()
	f.s.onPodDelete(p)
}

func (f *fakeCluster) Bind(ctx context.Context, ns, name string, b *corev1.Binding) (string, error) {
	if f.bindHook != nil {
		if err := f.bindHook(ctx, name); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	old, ok := f.pods[name]
	if !ok {
		f.mu.Unlock()
		return "", apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if old.Spec.NodeName != "" {
		f.mu.Unlock()
		return "", apierrors.NewConflict(corev1.Resource("pods"), name, fmt.Errorf("already assigned"))
	}
	bound := old.DeepCopy()
	bound.Spec.NodeName = b.Target.Name
	bound.ResourceVersion = f.nextRV()
	f.pods[name] = bound
	f.bindings[name] = b
	f.mu.Unlock()
	f.s.onPodUpdate(old, bound)
	return bound.ResourceVersion, nil
}

func (f *fakeCluster) PatchStatus(_ context.Context, _, name string, _ types.PatchType, data []byte) error {
	var patch struct {
		Metadata struct{ ResourceVersion string }
		Status   struct{ Conditions []corev1.PodCondition }
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		return err
	}
	f.mu.Lock()
	old := f.pods[name]
	if patch.Metadata.ResourceVersion != old.ResourceVersion {
		f.mu.Unlock()
		return apierrors.NewConflict(corev1.Resource("pods"), name, fmt.Errorf("stale"))
	}
	p := old.DeepCopy()
	p.Status.Conditions = patch.Status.Conditions
	p.ResourceVersion = f.nextRV()
	f.pods[name] = p
	f.patches++
	f.mu.Unlock()
	f.s.onPodUpdate(old, p)
	return nil
}

func (f *fakeCluster) GetPod(_ context.Context, _, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return p.DeepCopy(), nil
}

func (f *fakeCluster) Eventf(_ runtime.Object, _, reason, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason+": "+fmt.Sprintf(format, args...))
}

func (f *fakeCluster) pod(name string) *corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[name].DeepCopy()
}

func (f *fakeCluster) counts() (patches, events int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.patches, len(f.events)
}

// start builds a scheduler over a fake cluster and runs its loop until
// the test ends.
func start(t *testing.T, cfg Config) *fakeCluster {
	t.Helper()
	if cfg.PodInitialBackoff == 0 {
		cfg.PodInitialBackoff, cfg.PodMaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	}
	if cfg.UnschedulableTimeout == 0 {
		cfg.UnschedulableTimeout = time.Hour
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{pods: map[string]*corev1.Pod{}, bindings: map[string]*corev1.Binding{}}
	s, err := newScheduler(cfg, f, f, f)
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.loop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// eventually polls cond for up to 5 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (f *fakeCluster) waitNode(t *testing.T, pod string) string {
	t.Helper()
	var node string
	eventually(t, "pod "+pod+" to be bound", func() bool {
		node = f.pod(pod).Spec.NodeName
		return node != ""
	})
	return node
}

// waitPlugin makes pods wait until released, then lets them through.
type waitPlugin struct {
	mu       sync.Mutex
	released bool
}

func (w *waitPlugin) Name() string { return "Waiter" }

func (w *waitPlugin) PreFilter(context.Context, *framework.CycleState, *corev1.Pod, *framework.Snapshot) *framework.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return nil
	}
	return framework.NewStatus(framework.Wait, "waiting for claim gpu to be created")
}

func (w *waitPlugin) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{{Event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add}}}
}

func (w *waitPlugin) ContributeBinding(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, _ string, b *corev1.Binding) *framework.Status {
	b.ResourceClaims = append(b.ResourceClaims, corev1.BindingResourceClaim{Name: pod.Name + "-gpu"})
	return nil
}
