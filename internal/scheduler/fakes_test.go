package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
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
	binds    int // successful Bind calls
	patches  int
	events   []string // "reason: message"
	rv       int

	// bindHook, if set, runs before a bind and may fail it.
	bindHook func(ctx context.Context, pod string) error

	// dra, if set, holds the DRA objects behind the scheduler's DRA extension;
	// bindings allocate and reserve its claims.
	dra *fakeDRA
	// lagClaims holds back the claim updates of bindings (a claim informer
	// behind the pod informer) until publishClaims.
	lagClaims bool
	lagged    [][2]*resourceapi.ResourceClaim
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
	if old.Spec.NodeName != "" && (old.Spec.NodeName != b.Target.Name || len(b.ResourceClaims) == 0) {
		f.mu.Unlock()
		return "", apierrors.NewConflict(corev1.Resource("pods"), name, fmt.Errorf("already assigned"))
	}
	rv := f.nextRV()
	claims, err := f.bindClaims(old, b, rv)
	if err != nil {
		f.mu.Unlock()
		return "", err
	}
	bound := old.DeepCopy()
	bound.Spec.NodeName = b.Target.Name
	bound.ResourceVersion = rv
	f.pods[name] = bound
	f.bindings[name] = b
	f.binds++
	if f.lagClaims {
		f.lagged = append(f.lagged, claims...)
		claims = nil
	}
	f.mu.Unlock()
	f.s.onPodUpdate(old, bound)
	for _, c := range claims {
		f.dra.updateClaim(f.s, c[0], c[1])
	}
	return rv, nil
}

// bindClaims applies a binding's claims as the API server would: the
// allocation (if any) and the pod in reservedFor, at revision rv. It
// returns the (old, new) claims. Callers hold f.mu.
func (f *fakeCluster) bindClaims(pod *corev1.Pod, b *corev1.Binding, rv string) ([][2]*resourceapi.ResourceClaim, error) {
	if f.dra == nil {
		return nil, nil
	}
	var out [][2]*resourceapi.ResourceClaim
	for _, bc := range b.ResourceClaims {
		old, ok := f.dra.claim(pod.Namespace, bc.Name)
		if !ok {
			return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), bc.Name)
		}
		if bc.ResourceVersion != "" && bc.ResourceVersion != old.ResourceVersion {
			return nil, apierrors.NewConflict(resourceapi.Resource("resourceclaims"), bc.Name, fmt.Errorf("changed"))
		}
		c := old.DeepCopy()
		if bc.Allocation != nil {
			if c.Status.Allocation != nil {
				return nil, apierrors.NewConflict(resourceapi.Resource("resourceclaims"), bc.Name, fmt.Errorf("already allocated"))
			}
			c.Status.Allocation = &resourceapi.AllocationResult{}
			if err := json.Unmarshal(bc.Allocation.Raw, c.Status.Allocation); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			c.Status.DriverName = bc.DriverName
		}
		if c.Status.Allocation == nil {
			return nil, apierrors.NewConflict(resourceapi.Resource("resourceclaims"), bc.Name, fmt.Errorf("not allocated"))
		}
		if !slices.ContainsFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
		c.ResourceVersion = rv
		out = append(out, [2]*resourceapi.ResourceClaim{old, c})
	}
	return out, nil
}

// publishClaims lets the claim informer catch up with held-back bindings.
func (f *fakeCluster) publishClaims() {
	f.mu.Lock()
	lagged := f.lagged
	f.lagged, f.lagClaims = nil, false
	f.mu.Unlock()
	for _, c := range lagged {
		f.dra.updateClaim(f.s, c[0], c[1])
	}
}

// updatePodStatus changes a pod's status as another component would.
func (f *fakeCluster) updatePodStatus(name string, mutate func(*corev1.PodStatus)) {
	f.mu.Lock()
	old := f.pods[name]
	p := old.DeepCopy()
	mutate(&p.Status)
	p.ResourceVersion = f.nextRV()
	f.pods[name] = p
	f.mu.Unlock()
	f.s.onPodUpdate(old, p)
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
	if rv := patch.Metadata.ResourceVersion; rv != "" && rv != old.ResourceVersion {
		f.mu.Unlock()
		return apierrors.NewConflict(corev1.Resource("pods"), name, fmt.Errorf("stale"))
	}
	p := old.DeepCopy()
	for _, c := range patch.Status.Conditions { // merged by type, as a strategic merge patch does
		if i := slices.IndexFunc(p.Status.Conditions, func(x corev1.PodCondition) bool { return x.Type == c.Type }); i >= 0 {
			p.Status.Conditions[i] = c
		} else {
			p.Status.Conditions = append(p.Status.Conditions, c)
		}
	}
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
// the test ends; setup runs before the loop starts.
func start(t *testing.T, cfg Config, setup ...func(*fakeCluster)) *fakeCluster {
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
	for _, fn := range setup {
		fn(f)
	}
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
