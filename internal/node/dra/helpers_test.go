package dra

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/pkg/client"
)

const gpuDriver = "gpu.example.com"

// env is one test's node: its identity, namespace, registry directory and
// checkpoint directory, shared by the Managers the test starts.
type env struct {
	t        *testing.T
	node     string
	nc       *client.Client // the node's identity
	admin    *client.Client // plays scheduler and claim controller
	ns       string
	registry string
	cpDir    string
	wakes    *wakeLog
	events   *eventLog
}

func newEnv(t *testing.T) *env {
	t.Helper()
	needCluster(t)
	e := &env{t: t, node: takeNode(t), admin: adminClient(t), wakes: &wakeLog{}, events: &eventLog{}}
	e.nc = nodeClient(t, e.node)
	e.ns = e.node
	e.registry = dratest.ShortTempDir(t)
	e.cpDir = t.TempDir()
	if _, err := e.nc.Nodes().Create(callCtx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node, Labels: map[string]string{"dra-test": "yes"}}}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	if _, err := e.admin.Namespaces().Create(callCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return e
}

// options are short timers for tests.
func (e *env) options() Options {
	return Options{
		NodeName: e.node, Client: e.nc, RegistryDir: e.registry, CheckpointDir: e.cpDir,
		SliceGracePeriod: time.Second, PrepareTimeout: 5 * time.Second,
		BackoffInitial: 300 * time.Millisecond, BackoffMax: time.Second,
		RPCTimeout: 5 * time.Second, RedialInterval: 50 * time.Millisecond, APITimeout: 20 * time.Second,
		Wake: e.wakes.add, Events: e.events, Logger: testLogger(e.t),
	}
}

// start runs a Manager until the returned stop (or the test's end).
func (e *env) start(tweak ...func(*Options)) *Manager {
	e.t.Helper()
	opts := e.options()
	for _, f := range tweak {
		f(&opts)
	}
	m, err := New(opts)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	if err := m.Start(context.Background()); err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	e.t.Cleanup(m.Stop)
	return m
}

// plugin starts a test plugin for driver and waits until it is
// registered.
func (e *env) plugin(m *Manager, driver string, tweak ...func(*dratest.Options)) *dratest.Plugin {
	e.t.Helper()
	o := dratest.Options{Name: driver, RegistryDir: e.registry}
	for _, f := range tweak {
		f(&o)
	}
	p := dratest.Start(e.t, o)
	if st := p.Status(e.t); !st.PluginRegistered {
		e.t.Fatalf("plugin %s not registered: %s", driver, st.Error)
	}
	eventually(e.t, driver+" registered", func() (bool, string) { return m.drivers.get(driver) != nil, "" })
	return p
}

// claim creates an unallocated claim.
func (e *env) claim(name string) *resourcev1alpha2.ResourceClaim {
	e.t.Helper()
	c, err := e.admin.ResourceClaims(e.ns).Create(callCtx(e.t), &resourcev1alpha2.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"},
	})
	if err != nil {
		e.t.Fatalf("create claim %s: %v", name, err)
	}
	return c
}

// updateClaimStatus applies f to the stored claim's status, as the
// scheduler or a driver controller would.
func (e *env) updateClaimStatus(name string, f func(*resourcev1alpha2.ResourceClaim)) *resourcev1alpha2.ResourceClaim {
	e.t.Helper()
	c, err := e.admin.ResourceClaims(e.ns).Get(callCtx(e.t), name)
	if err != nil {
		e.t.Fatalf("get claim %s: %v", name, err)
	}
	f(c)
	out, err := e.admin.ResourceClaims(e.ns).UpdateStatus(callCtx(e.t), c)
	if err != nil {
		e.t.Fatalf("update claim %s status: %v", name, err)
	}
	return out
}

// allocate gives the claim an opaque allocation for driver on this node.
func (e *env) allocate(name, driver string) *resourcev1alpha2.ResourceClaim {
	return e.updateClaimStatus(name, func(c *resourcev1alpha2.ResourceClaim) {
		c.Status.DriverName = driver
		c.Status.Allocation = &resourcev1alpha2.AllocationResult{
			ResourceHandles:  []resourcev1alpha2.ResourceHandle{{DriverName: driver, Data: "handle-of-" + name}},
			AvailableOnNodes: nodeSelector("dra-test", "yes"),
			Shareable:        true,
		}
	})
}

// reserve adds the pods to the claim's reservedFor.
func (e *env) reserve(name string, ps ...*corev1.Pod) *resourcev1alpha2.ResourceClaim {
	return e.updateClaimStatus(name, func(c *resourcev1alpha2.ResourceClaim) {
		for _, p := range ps {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1alpha2.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
		}
	})
}

func nodeSelector(key, value string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}},
	}}}
}

// pod creates a pod bound to the node whose container uses the claims
// (entry name = claim name).
func (e *env) pod(name string, claims ...string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       corev1.PodSpec{NodeName: e.node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: &c})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c})
	}
	out, err := e.admin.Pods(e.ns).Create(callCtx(e.t), p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

// readyPod creates a claim allocated for driver and a pod it is reserved
// for.
func (e *env) readyPod(pod, claim, driver string) *corev1.Pod {
	e.t.Helper()
	e.claim(claim)
	e.allocate(claim, driver)
	p := e.pod(pod, claim)
	e.reserve(claim, p)
	return p
}

// admit asks m until it stops answering WaitingForResourceClaim (the
// informer may lag behind the test's writes) and returns its answer.
func admit(t *testing.T, m *Manager, pod *corev1.Pod) pods.Admission {
	t.Helper()
	var a pods.Admission
	eventually(t, "claims of "+pod.Name+" seen", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a = m.Admit(ctx, pod)
		return a.Reason != ReasonWaitingForClaim, a.Message
	})
	return a
}

func wantAdmitted(t *testing.T, a pods.Admission) {
	t.Helper()
	if a.Verdict != pods.Admit {
		t.Fatalf("admission %v %s: %s, want admit", a.Verdict, a.Reason, a.Message)
	}
}

func wantHold(t *testing.T, a pods.Admission, reason string, msgParts ...string) {
	t.Helper()
	if a.Verdict != pods.Hold || a.Reason != reason {
		t.Fatalf("admission %v %s: %s, want hold %s", a.Verdict, a.Reason, a.Message, reason)
	}
	for _, s := range msgParts {
		if !strings.Contains(a.Message, s) {
			t.Fatalf("hold message %q does not mention %q", a.Message, s)
		}
	}
}

// claimNames turns calls into the sorted names of their claims.
func claimNames(calls [][]*drapb.Claim) [][]string {
	out := make([][]string, 0, len(calls))
	for _, call := range calls {
		var names []string
		for _, c := range call {
			names = append(names, c.GetName())
		}
		slices.Sort(names)
		out = append(out, names)
	}
	return out
}

func release(t *testing.T, m *Manager, pod *corev1.Pod) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Release(ctx, pod)
}

func containerDevices(t *testing.T, m *Manager, pod *corev1.Pod) []string {
	t.Helper()
	o, err := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatalf("ContainerOptions: %v", err)
	}
	return o.CDIDevices
}

// wakeLog records Options.Wake calls.
type wakeLog struct {
	mu   sync.Mutex
	uids []types.UID
}

func (w *wakeLog) add(uid types.UID) { w.mu.Lock(); w.uids = append(w.uids, uid); w.mu.Unlock() }

func (w *wakeLog) count(uid types.UID) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, u := range w.uids {
		if u == uid {
			n++
		}
	}
	return n
}

// eventLog records events as "KIND/NAME TYPE REASON MESSAGE".
type eventLog struct {
	mu   sync.Mutex
	list []string
}

func (l *eventLog) Eventf(obj k8sruntime.Object, typ, reason, format string, args ...any) {
	name := ""
	if m, ok := obj.(metav1.Object); ok {
		name = m.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, fmt.Sprintf("%T/%s %s %s %s", obj, name, typ, reason, fmt.Sprintf(format, args...)))
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// testLogger logs to the test until it ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// metric returns the value of the sample of name whose labels include
// want (a histogram's sample count); 0 when there is none.
func metric(t *testing.T, m *Manager, name string, want ...string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if have[want[i]] != want[i+1] {
					continue samples
				}
			}
			switch {
			case s.Counter != nil:
				return s.GetCounter().GetValue()
			case s.Gauge != nil:
				return s.GetGauge().GetValue()
			case s.Histogram != nil:
				return float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}
