package pods

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/runtime"
)

// fakeRuntime is an in-memory runtime.Runtime whose containers run until
// the test makes them exit.
type fakeRuntime struct {
	now func() time.Time

	mu          sync.Mutex
	seq         int
	ctrs        map[string]*runtime.ContainerStatus
	specs       map[string]runtime.ContainerSpec
	calls       []string
	createErr   map[string]error // by container name
	exitOnStart map[string]int32 // by container name: exits at once
}

func newFakeRuntime(now func() time.Time) *fakeRuntime {
	return &fakeRuntime{now: now, ctrs: map[string]*runtime.ContainerStatus{}, specs: map[string]runtime.ContainerSpec{},
		createErr: map[string]error{}, exitOnStart: map[string]int32{}}
}

func (f *fakeRuntime) record(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeRuntime) Name() string                          { return "fake" }
func (f *fakeRuntime) RuntimeVersion(context.Context) string { return "0.0.0" }
func (f *fakeRuntime) SupportsCDI() bool                     { return true }

func (f *fakeRuntime) Create(_ context.Context, s runtime.ContainerSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.createErr[s.Name]; err != nil {
		f.record("create-failed %s", s.Name)
		return "", err
	}
	f.seq++
	id := "c" + strconv.Itoa(f.seq)
	f.ctrs[id] = &runtime.ContainerStatus{ID: id, PodUID: s.PodUID, PodNamespace: s.PodNamespace, PodName: s.PodName,
		Name: s.Name, Attempt: s.Attempt, State: runtime.StateCreated, CreatedAt: f.now()}
	f.specs[id] = s
	f.record("create %s/%d", s.Name, s.Attempt)
	return id, nil
}

func (f *fakeRuntime) Start(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[id]
	if !ok {
		return runtime.ErrNotFound
	}
	c.State, c.StartedAt = runtime.StateRunning, f.now()
	if code, ok := f.exitOnStart[c.Name]; ok {
		c.State, c.ExitCode, c.FinishedAt = runtime.StateExited, code, f.now()
	}
	f.record("start %s/%d", c.Name, c.Attempt)
	return nil
}

func (f *fakeRuntime) Status(_ context.Context, id string) (runtime.ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[id]
	if !ok {
		return runtime.ContainerStatus{}, runtime.ErrNotFound
	}
	return *c, nil
}

func (f *fakeRuntime) Stop(_ context.Context, id string, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[id]
	if !ok {
		return runtime.ErrNotFound
	}
	f.record("stop %s/%d grace=%s", c.Name, c.Attempt, grace)
	if c.State != runtime.StateExited {
		c.State, c.ExitCode, c.Signal, c.FinishedAt = runtime.StateExited, 143, 15, f.now()
	}
	return nil
}

func (f *fakeRuntime) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[id]
	if !ok {
		return runtime.ErrNotFound
	}
	f.record("remove %s/%d", c.Name, c.Attempt)
	delete(f.ctrs, id)
	return nil
}

func (f *fakeRuntime) List(context.Context) ([]runtime.ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.ContainerStatus
	for _, c := range f.ctrs {
		out = append(out, *c)
	}
	return out, nil
}

// exit ends the current container named name.
func (f *fakeRuntime) exit(t *testing.T, name string, code int32) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ctrs {
		if c.Name == name && c.State == runtime.StateRunning {
			c.State, c.ExitCode, c.FinishedAt = runtime.StateExited, code, f.now()
			return
		}
	}
	t.Fatalf("no running container %s", name)
}

// takeCalls returns and clears the recorded calls.
func (f *fakeRuntime) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// add puts an existing container in the runtime (adoption tests).
func (f *fakeRuntime) add(c runtime.ContainerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctrs[c.ID] = &c
}

// fakeAPI stores one pod and checks resourceVersions like the API server.
type fakeAPI struct {
	mu      sync.Mutex
	pod     *corev1.Pod
	rv      int
	writes  int
	deleted []types.UID
	failing error
}

func newFakeAPI(pod *corev1.Pod) *fakeAPI {
	a := &fakeAPI{rv: 1}
	p := pod.DeepCopy()
	p.ResourceVersion = "1"
	a.pod = p
	return a
}

var podsResource = schema.GroupResource{Resource: "pods"}

func (a *fakeAPI) UpdatePodStatus(_ context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failing != nil {
		return nil, a.failing
	}
	if a.pod == nil {
		return nil, apierrors.NewNotFound(podsResource, pod.Name)
	}
	if pod.ResourceVersion != a.pod.ResourceVersion {
		return nil, apierrors.NewConflict(podsResource, pod.Name, fmt.Errorf("rv %s != %s", pod.ResourceVersion, a.pod.ResourceVersion))
	}
	a.writes++
	a.rv++
	p := a.pod.DeepCopy()
	p.Status = *pod.Status.DeepCopy()
	p.ResourceVersion = strconv.Itoa(a.rv)
	a.pod = p
	return p.DeepCopy(), nil
}

func (a *fakeAPI) GetPod(_ context.Context, _, name string) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pod == nil {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return a.pod.DeepCopy(), nil
}

func (a *fakeAPI) DeletePod(_ context.Context, _, name string, uid types.UID) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deleted = append(a.deleted, uid)
	if a.pod == nil {
		return apierrors.NewNotFound(podsResource, name)
	}
	a.pod = nil
	return nil
}

// modify changes the stored pod as another writer would.
func (a *fakeAPI) modify(fn func(*corev1.Pod)) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	fn(a.pod)
	a.rv++
	a.pod.ResourceVersion = strconv.Itoa(a.rv)
	return a.pod.DeepCopy()
}

func (a *fakeAPI) get() *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pod.DeepCopy()
}

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time       { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) step(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// harness drives one worker synchronously.
type harness struct {
	t     *testing.T
	clock *clock
	rt    *fakeRuntime
	api   *fakeAPI
	cfg   *Config
	w     *Worker
}

func newHarness(t *testing.T, pod *corev1.Pod, opts ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}}
	h.rt = newFakeRuntime(h.clock.now)
	h.api = newFakeAPI(pod)
	h.cfg = &Config{
		NodeName: "n1", HostIP: "10.0.0.1", Runtime: h.rt, API: h.api, StatusUpdates: true,
		Metrics: metrics.New(nil), Now: h.clock.now,
		Timing: Timing{Resync: time.Hour, RestartBackoffInitial: 10 * time.Second, RestartBackoffMax: 40 * time.Second, TerminatedCleanup: time.Minute},
	}
	for _, o := range opts {
		o(h.cfg)
	}
	h.cfg.SetDefaults()
	return h
}

// start creates the worker from the stored pod, with the runtime's
// current containers as existing ones.
func (h *harness) start() *harness {
	existing, _ := h.rt.List(context.Background())
	h.w = New(h.cfg, h.api.get(), existing)
	return h
}

func (h *harness) sync() time.Time {
	h.t.Helper()
	return h.w.Sync(context.Background())
}

// deleting marks the stored pod deleted now with a grace period of grace
// seconds and returns it, not yet delivered to the worker.
func (h *harness) deleting(grace int64) *corev1.Pod {
	return h.api.modify(func(p *corev1.Pod) {
		now := metav1.NewTime(h.clock.now())
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	})
}

// update delivers the stored pod to the worker, as the informer would.
func (h *harness) update() { h.w.Update(h.api.get()); h.w.takeMail() }

func (h *harness) status() corev1.PodStatus { return h.api.get().Status }

// pod builds test pods.
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) *podBuilder {
	grace := int64(30)
	return &podBuilder{p: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}}
}

func (b *podBuilder) init(names ...string) *podBuilder {
	for _, n := range names {
		b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, corev1.Container{Name: n, Image: "busybox"})
	}
	return b
}

func (b *podBuilder) containers(names ...string) *podBuilder {
	for _, n := range names {
		b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
	}
	return b
}

func (b *podBuilder) policy(p corev1.RestartPolicy) *podBuilder { b.p.Spec.RestartPolicy = p; return b }

func (b *podBuilder) obj() *corev1.Pod { return b.p }
