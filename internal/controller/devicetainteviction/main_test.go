package devicetainteviction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/controller/taineviction"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// cluster is an API server (with etcd) without scheduler, node agent or
// controller manager: the only controller is the one a test starts
// in-process.
var cluster *clienttest.Cluster

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "allot-devicetainteviction-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := clienttest.Build(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster, err = clienttest.Start(ctx, bin, dir, "--disable", "scheduler,node,controller-manager")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	code := m.Run()
	if code != 0 {
		log := strings.Split(strings.TrimRight(cluster.Log(), "\n"), "\n")
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", strings.Join(log[max(0, len(log)-40):], "\n"))
	}
	return code
}

// pollTimeout is generous: the tests assert outcomes, never timing.
const pollTimeout = 30 * time.Second

const driver = "gpu.example.com"

type env struct {
	t    *testing.T
	ctx  context.Context
	c    *client.Client
	ns   string
	node string
	reg  *prometheus.Registry
}

var nsSeq atomic.Int64

// newEnv connects to the cluster, creates a namespace and a node for the
// test, and starts a controller.
func newEnv(t *testing.T) *env {
	t.Helper()
	c, err := client.NewForKubeconfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("NewForKubeconfig: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, c: c, ns: fmt.Sprintf("dte-%d", nsSeq.Add(1)), reg: prometheus.NewRegistry()}
	if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	e.node = e.ns + "-node"
	if _, err := c.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node}}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	return e
}

// start runs a controller until the test ends. Tests do not run in
// parallel: every controller acts on the whole cluster, and a rule's
// status counts one controller's evictions.
func (e *env) start() *Controller {
	e.t.Helper()
	f := client.NewFactory(e.c, 0)
	ctrl, err := New(e.c, f, Options{
		Limiter:      taineviction.NewLimiter(100, 100),
		StatusPeriod: 100 * time.Millisecond,
		Registry:     e.reg,
		Logger:       slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	f.Start(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 2) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			e.t.Errorf("Run: %v", err)
		}
		f.Shutdown()
	})
	return ctrl
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// eventually polls cond until it holds, failing the test after pollTimeout.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slice publishes the node's pool: devices gpu-0 .. gpu-(n-1).
func (e *env) slice(n int) *resourcev1.ResourceSlice {
	e.t.Helper()
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.node + "-gpu"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: e.node, ResourceSliceCount: 1}, NodeName: &e.node}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	out, err := e.c.ResourceSlices().Create(e.ctx, s)
	if err != nil {
		e.t.Fatalf("create slice: %v", err)
	}
	return out
}

// podWithClaim creates a v1 claim and a pod using it, and binds the pod to
// the node with the device allocated with tols, as the scheduler does.
func (e *env) podWithClaim(name, device string, tols ...resourcev1.DeviceToleration) *corev1.Pod {
	e.t.Helper()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: driver, Tolerations: tols},
		}}}}}
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		e.t.Fatalf("create claim: %v", err)
	}
	pod := e.createPod(name, name)
	alloc := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: driver, Pool: e.node, Device: device, Tolerations: tols,
	}}}}
	e.bind(pod, name, alloc)
	return e.pod(name)
}

// seedPodWithClaim is podWithClaim with a claim of the seed API
// (resource.k8s.io/v1alpha2): its instance is device "device" of the
// driver's pool named after the node.
func (e *env) seedPodWithClaim(name, device string) *corev1.Pod {
	e.t.Helper()
	claim := &resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"}}
	if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, claim); err != nil {
		e.t.Fatalf("create seed claim: %v", err)
	}
	pod := e.createPod(name, name)
	alloc := &resourcev1alpha2.AllocationResult{
		ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: driver, StructuredData: &resourcev1alpha2.StructuredResourceHandle{
			NodeName:      e.node,
			Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{{ID: device}}},
		}}},
		AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{e.node}}},
		}}},
	}
	e.bind(pod, name, alloc)
	return e.pod(name)
}

func (e *env) createPod(name, claim string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if claim != "" {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	}
	out, err := e.c.Pods(e.ns).Create(e.ctx, p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

func (e *env) bind(pod *corev1.Pod, claim string, alloc any) {
	e.t.Helper()
	raw, err := json.Marshal(alloc)
	if err != nil {
		e.t.Fatal(err)
	}
	b := &corev1.Binding{
		Target:           corev1.ObjectReference{Kind: "Node", Name: e.node},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: claim, DriverName: driver, Allocation: &runtime.RawExtension{Raw: raw}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: e.node, DriverName: driver, Revision: pod.ResourceVersion}},
	}
	b.APIVersion, b.Kind = "v1", "Binding"
	if _, err := e.c.Bind(e.ctx, e.ns, pod.Name, b); err != nil {
		e.t.Fatalf("bind pod %s: %v", pod.Name, err)
	}
}

// pod reads a pod; nil when it is gone.
func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.c.Pods(e.ns).Get(e.ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// keeps watches the pod until the deadline and fails the test as soon as
// it is deleted or marked for deletion: the test's check that the
// controller leaves it alone. Callers say why the deadline is enough.
func (e *env) keeps(name string, until time.Time) {
	e.t.Helper()
	ctx, cancel := context.WithDeadline(e.ctx, until)
	defer cancel()
	for ctx.Err() == nil {
		p := e.pod(name)
		if p == nil {
			e.t.Fatalf("pod %s was evicted before %v: gone", name, until)
		}
		if p.DeletionTimestamp != nil {
			e.t.Fatalf("pod %s was evicted before %v: deleted at %v", name, until, p.DeletionTimestamp)
		}
		w, err := e.c.Pods(e.ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + name, ResourceVersion: p.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.t.Fatalf("watch pod %s: %v", name, err)
		}
		for ev := range w.ResultChan() {
			q, _ := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Deleted || (q != nil && q.DeletionTimestamp != nil) {
				w.Stop()
				e.t.Fatalf("pod %s was evicted before %v: %s event", name, until, ev.Type)
			}
		}
		w.Stop() // ended by the deadline, or by the server: then watch again
	}
}

// evicted reports whether the pod was evicted by this controller: being
// deleted (or gone) with the DisruptionTarget condition of the device
// taint manager.
func (e *env) evicted(name string) func() bool {
	return func() bool {
		p := e.pod(name)
		if p == nil {
			return true
		}
		return p.DeletionTimestamp != nil && disruption(p) != nil
	}
}

func disruption(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == taineviction.ConditionDisruptionTarget && c.Reason == ReasonDeletionByDeviceTaintManager {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// event reports whether the pod has an event of this controller with the
// message.
func (e *env) event(pod, message string) func() bool {
	return func() bool {
		list, err := e.c.Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name == pod && ev.Reason == EventReasonEviction && ev.Message == message {
				return true
			}
		}
		return false
	}
}

// rule creates a DeviceTaintRule selecting the device (every device of
// the node's pool when device is "").
func (e *env) rule(name, device string, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	e.t.Helper()
	sel := &resourcev1.DeviceTaintSelector{Driver: ptr(driver), Pool: ptr(e.node)}
	if device != "" {
		sel.Device = ptr(device)
	}
	r := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: resourcev1.DeviceTaint{Key: "example.com/unhealthy", Effect: effect}}}
	out, err := e.c.DeviceTaintRules().Create(e.ctx, r)
	if err != nil {
		e.t.Fatalf("create rule: %v", err)
	}
	e.t.Cleanup(func() { _ = e.c.DeviceTaintRules().Delete(context.Background(), out.Name, metav1.DeleteOptions{}) })
	return out
}

// ruleCondition returns the rule's EvictionInProgress condition.
func (e *env) ruleCondition(name string) *metav1.Condition {
	e.t.Helper()
	r, err := e.c.DeviceTaintRules().Get(e.ctx, name)
	if err != nil {
		e.t.Fatalf("get rule %s: %v", name, err)
	}
	for i, c := range r.Status.Conditions {
		if c.Type == resourcev1.DeviceTaintConditionEvictionInProgress {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

func (e *env) ruleSays(name, reason, message string) func() bool {
	return func() bool {
		c := e.ruleCondition(name)
		return c != nil && c.Reason == reason && c.Message == message
	}
}

func ptr[T any](v T) *T { return &v }

// counter reads a counter of the controller's registry.
func (e *env) counter(name string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
