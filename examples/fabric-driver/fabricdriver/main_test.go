package fabricdriver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
	"allot.dev/allot/pkg/driver/controller"
)

// The cluster of the controller tests: `allot up` without scheduler and
// node agent (the tests act as the scheduler) with the driver's CRD and
// class applied; an admin client, and a client with a driver token for
// fabric.example.com, which every controller of the tests runs with.
var (
	cluster     *clienttest.Cluster
	allotBinary string
	admin       *client.Client
	driver      *client.Client
)

// className is the class of deploy/class.yaml.
const className = DriverName

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fabric-driver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if allotBinary, err = clienttest.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cluster, err = clienttest.Start(ctx, allotBinary, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	if err := setUp(ctx); err != nil {
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

func setUp(ctx context.Context) error {
	var err error
	if admin, err = client.NewForKubeconfig(cluster.Kubeconfig); err != nil {
		return err
	}
	// The driver's part of deploy/, as an administrator installs it.
	cmd := exec.CommandContext(ctx, allotBinary, "apply", "-f", "../deploy")
	cmd.Env = cluster.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("allot apply -f deploy: %w\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, allotBinary, "token", "create", "--data-dir", cluster.DataDir,
		"--role", "driver", "--name", DriverName).Output()
	if err != nil {
		return fmt.Errorf("create a driver token: %w", err)
	}
	rc := admin.RESTConfig()
	rc.BearerToken = strings.TrimSpace(string(out))
	if driver, err = client.NewForConfig(rc); err != nil {
		return err
	}
	// The API server reloads its tokens file, and serves the CRD, soon.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := driver.Dynamic().Resource(GroupVersionResource).List(ctx, metav1.ListOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("list %s with the driver token: %w", Resource, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

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

var nameSeq atomic.Int64

// testEnv is one test's namespace and node name prefix.
type testEnv struct {
	t  *testing.T
	ns string
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	ns := fmt.Sprintf("fabric-%d", nameSeq.Add(1))
	if _, err := admin.Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return &testEnv{t: t, ns: ns}
}

// node returns the cluster-wide name of the test's node short, creating
// the node with labels the first time.
func (e *testEnv) node(short string, labels map[string]string) string {
	e.t.Helper()
	name := e.ns + "-" + short
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := admin.Nodes().Create(testContext(e.t), n); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("create node %s: %v", name, err)
	}
	return name
}

// startController runs the controller on the pools for the test's
// namespace with short timers until the test ends or stop; wrap, when
// set, stands between the SDK and the allocator.
func (e *testEnv) startController(pools string, wrap func(controller.Driver) controller.Driver) *running {
	t := e.t
	t.Helper()
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(strings.TrimLeft(pools, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ctl, err := newController(ControllerConfig{PoolsFile: file, Controller: controller.Config{
		Client: driver, Namespace: e.ns, Workers: 4, Resync: time.Minute,
		MinRetryDelay: 10 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond,
		APITimeout: 10 * time.Second, DriverTimeout: 10 * time.Second, EventFlushTimeout: 2 * time.Second, Host: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}}, wrap)
	if err != nil {
		t.Fatalf("newController: %v", err)
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

type running struct {
	cancel context.CancelFunc
	done   chan error
}

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

// params creates a FabricClaimParameters with spec.
func (e *testEnv) params(name string, spec map[string]any) {
	e.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": name, "namespace": e.ns}, "spec": spec,
	}}
	if _, err := admin.Dynamic().Resource(GroupVersionResource).Namespace(e.ns).Create(testContext(e.t), obj, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create %s %s: %v", Kind, name, err)
	}
}

// claim creates a claim of the driver's class; params "" means none.
func (e *testEnv) claim(name, params string, mode resourcev1alpha2.AllocationMode) *resourcev1alpha2.ResourceClaim {
	e.t.Helper()
	c := &resourcev1alpha2.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: className, AllocationMode: mode}}
	if params != "" {
		c.Spec.ParametersRef = &resourcev1alpha2.ResourceClaimParametersReference{APIGroup: Group, Kind: Kind, Name: params}
	}
	out, err := admin.ResourceClaims(e.ns).Create(testContext(e.t), c)
	if err != nil {
		e.t.Fatalf("create claim %s: %v", name, err)
	}
	return out
}

// podWithContext creates a pod using claims (entries named after them)
// and its scheduling context with spec, as the scheduler would.
func (e *testEnv) podWithContext(name string, spec resourcev1alpha2.PodSchedulingContextSpec, claims ...string) *corev1.Pod {
	e.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: &c})
	}
	pod, err := admin.Pods(e.ns).Create(testContext(e.t), pod)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	yes := true
	sc := &resourcev1alpha2.PodSchedulingContext{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: pod.UID, Controller: &yes}}}, Spec: spec}
	if _, err := admin.PodSchedulingContexts(e.ns).Create(testContext(e.t), sc); err != nil {
		e.t.Fatalf("create podschedulingcontext %s: %v", name, err)
	}
	return pod
}

// selectNode sets the context's selected node, retrying conflicts with
// the driver's status writes.
func (e *testEnv) selectNode(podName, node string) {
	e.t.Helper()
	for {
		sc, err := admin.PodSchedulingContexts(e.ns).Get(testContext(e.t), podName)
		if err != nil {
			e.t.Fatal(err)
		}
		sc.Spec.SelectedNode = node
		_, err = admin.PodSchedulingContexts(e.ns).Update(testContext(e.t), sc)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			e.t.Fatalf("select node: %v", err)
		}
	}
}

// unsuitable returns the context's unsuitable nodes of entry, and whether
// there is an entry.
func (e *testEnv) unsuitable(podName, entry string) ([]string, bool) {
	e.t.Helper()
	sc, err := admin.PodSchedulingContexts(e.ns).Get(testContext(e.t), podName)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range sc.Status.ResourceClaims {
		if s.Name == entry {
			return s.UnsuitableNodes, true
		}
	}
	return nil, false
}

func (e *testEnv) getClaim(name string) *resourcev1alpha2.ResourceClaim {
	e.t.Helper()
	c, err := admin.ResourceClaims(e.ns).Get(testContext(e.t), name)
	if err != nil {
		e.t.Fatalf("get claim %s: %v", name, err)
	}
	return c
}

// allocated waits for the claim's allocation and returns its handle.
func (e *testEnv) allocated(name string) (*resourcev1alpha2.ResourceClaim, Handle) {
	e.t.Helper()
	var c *resourcev1alpha2.ResourceClaim
	eventually(e.t, "claim "+name+" allocated", func() bool {
		c = e.getClaim(name)
		return c.Status.Allocation != nil
	})
	hs := c.Status.Allocation.ResourceHandles
	if len(hs) != 1 || hs[0].DriverName != DriverName {
		e.t.Fatalf("claim %s: handles %+v, want one of %s", name, hs, DriverName)
	}
	h, err := DecodeHandle(hs[0].Data)
	if err != nil {
		e.t.Fatalf("claim %s: %v", name, err)
	}
	return c, h
}

// hasEvent reports whether an event with reason is recorded about the
// object with uid.
func (e *testEnv) hasEvent(uid types.UID, reason string) bool {
	e.t.Helper()
	list, err := admin.Events(e.ns).List(testContext(e.t), metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list events: %v", err)
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
