package controller

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// The cluster of the integration tests: `allot up` without scheduler and
// node agent (the tests act as the scheduler), with the controller
// manager (it removes reservations of deleted pods and collects orphans);
// an admin client, and a client with a driver token for testDriver, which
// every controller of the tests runs with.
var (
	cluster *clienttest.Cluster
	admin   *client.Client
	driver  *client.Client
)

const (
	testDriver = "fake.example.com"
	// Classes: ours; our driver with another controller; another driver.
	classOurs            = "fake-controlled"
	classOtherController = "fake-other-controller"
	classOtherDriver     = "other-driver"
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "driver-controller-test-")
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
	if cluster, err = clienttest.Start(ctx, bin, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	if err := setUp(ctx, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		log := strings.Split(strings.TrimRight(cluster.Log(), "\n"), "\n")
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", strings.Join(log[max(0, len(log)-60):], "\n"))
	}
	return code
}

func setUp(ctx context.Context, bin string) error {
	var err error
	if admin, err = client.NewForKubeconfig(cluster.Kubeconfig); err != nil {
		return err
	}
	for _, c := range []*resourcev1alpha2.ResourceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: classOurs}, DriverName: testDriver, ControllerName: testDriver},
		{ObjectMeta: metav1.ObjectMeta{Name: classOtherController}, DriverName: testDriver, ControllerName: "other.example.com"},
		{ObjectMeta: metav1.ObjectMeta{Name: classOtherDriver}, DriverName: "other.example.com", ControllerName: "other.example.com"},
	} {
		if _, err := admin.ResourceClasses().Create(ctx, c); err != nil {
			return fmt.Errorf("create class %s: %w", c.Name, err)
		}
	}
	out, err := exec.CommandContext(ctx, bin, "token", "create", "--data-dir", cluster.DataDir,
		"--role", "driver", "--name", testDriver).Output()
	if err != nil {
		return fmt.Errorf("create a driver token: %w", err)
	}
	rc := admin.RESTConfig()
	rc.BearerToken = strings.TrimSpace(string(out))
	if driver, err = client.NewForConfig(rc); err != nil {
		return err
	}
	// The API server reloads its tokens file soon.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := driver.ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("list claims with the driver token: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testContext is bounded so that a hung server fails the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq atomic.Int64

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("ctl-%d", nameSeq.Add(1))
	if _, err := admin.Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// running is a controller started by startController.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// startController runs a controller for namespace ns with the driver
// token, v as the driver and short timers, until the test ends (or stop);
// Run must then return nil.
func startController(t *testing.T, ns string, v Driver) *running {
	t.Helper()
	logs := &syncBuffer{}
	ctl, err := New(Config{
		Client: driver, DriverName: testDriver, Namespace: ns, Workers: 2, Resync: time.Minute,
		MinRetryDelay: 10 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond,
		APITimeout: 10 * time.Second, DriverTimeout: 10 * time.Second, EventFlushTimeout: 2 * time.Second, Host: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, v)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- ctl.Run(ctx) }()
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})
	return r
}

// stop cancels the controller and checks that Run returned nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("Run returned %v, want nil after stop", err)
	}
}

// eventually polls cond until it holds or 30 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// claimBuilder builds test claims: makeClaim("c").immediate().obj().
type claimBuilder struct {
	c *resourcev1alpha2.ResourceClaim
}

func makeClaim(name string) *claimBuilder {
	return &claimBuilder{&resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: classOurs}}}
}

func (b *claimBuilder) class(name string) *claimBuilder { b.c.Spec.ResourceClassName = name; return b }

func (b *claimBuilder) immediate() *claimBuilder {
	b.c.Spec.AllocationMode = resourcev1alpha2.AllocationModeImmediate
	return b
}

func (b *claimBuilder) obj() *resourcev1alpha2.ResourceClaim { return b.c }

// createClaim stores a claim in ns as a user would.
func createClaim(t *testing.T, ns string, b *claimBuilder) *resourcev1alpha2.ResourceClaim {
	t.Helper()
	c := b.obj()
	c.Namespace = ns
	out, err := admin.ResourceClaims(ns).Create(testContext(t), c)
	if err != nil {
		t.Fatalf("create claim %s: %v", c.Name, err)
	}
	return out
}

// createPod stores a pod that uses the named claims, each through an
// entry of the same name.
func createPod(t *testing.T, ns, name string, claims ...string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: &c})
	}
	out, err := admin.Pods(ns).Create(testContext(t), pod)
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

// createContext stores the pod's scheduling context as the scheduler
// does: named after the pod, owned by it.
func createContext(t *testing.T, pod *corev1.Pod, spec resourcev1alpha2.PodSchedulingContextSpec) *resourcev1alpha2.PodSchedulingContext {
	t.Helper()
	yes := true
	sc := &resourcev1alpha2.PodSchedulingContext{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes}}},
		Spec: spec,
	}
	out, err := admin.PodSchedulingContexts(pod.Namespace).Create(testContext(t), sc)
	if err != nil {
		t.Fatalf("create podschedulingcontext %s: %v", pod.Name, err)
	}
	return out
}

// updateContextSpec changes a scheduling context's spec as the scheduler
// does, retrying conflicts with the driver's status writes.
func updateContextSpec(t *testing.T, ns, name string, change func(*resourcev1alpha2.PodSchedulingContextSpec)) {
	t.Helper()
	for {
		sc := getContext(t, ns, name)
		change(&sc.Spec)
		_, err := admin.PodSchedulingContexts(ns).Update(testContext(t), sc)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update podschedulingcontext %s: %v", name, err)
		}
	}
}

func getContext(t *testing.T, ns, name string) *resourcev1alpha2.PodSchedulingContext {
	t.Helper()
	sc, err := admin.PodSchedulingContexts(ns).Get(testContext(t), name)
	if err != nil {
		t.Fatalf("get podschedulingcontext %s: %v", name, err)
	}
	return sc
}

func getClaim(t *testing.T, ns, name string) *resourcev1alpha2.ResourceClaim {
	t.Helper()
	c, err := admin.ResourceClaims(ns).Get(testContext(t), name)
	if err != nil {
		t.Fatalf("get claim %s: %v", name, err)
	}
	return c
}

// claimGone reports whether the claim no longer exists.
func claimGone(t *testing.T, ns, name string) bool {
	t.Helper()
	_, err := admin.ResourceClaims(ns).Get(testContext(t), name)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get claim %s: %v", name, err)
	}
	return err != nil
}

// entryOf returns the status entry of a pod claim entry, and whether
// there is one.
func entryOf(sc *resourcev1alpha2.PodSchedulingContext, entry string) ([]string, bool) {
	for _, e := range sc.Status.ResourceClaims {
		if e.Name == entry {
			return e.UnsuitableNodes, true
		}
	}
	return nil, false
}

// hasEvent reports whether an event with reason is recorded about the
// claim with uid.
func hasEvent(t *testing.T, ns string, uid types.UID, reason string) bool {
	t.Helper()
	list, err := admin.Events(ns).List(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.UID == string(uid) && ev.Reason == reason {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
