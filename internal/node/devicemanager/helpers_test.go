package devicemanager

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
)

const gpu = "example.com/gpu"

// socketDir returns a short temporary directory: unix socket paths are
// limited to ~108 bytes, which t.TempDir can exceed.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

type testManager struct {
	*Manager
	dir     string
	changes *atomic.Int64
}

// startManager starts a Manager on dir with a short grace period and
// RPC timeout.
func startManager(t testing.TB, dir string, tweak ...func(*Options)) testManager {
	t.Helper()
	changes := &atomic.Int64{}
	opts := Options{Dir: dir, GracePeriod: time.Second, RPCTimeout: 2 * time.Second, OnChange: func() { changes.Add(1) }}
	for _, f := range tweak {
		f(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { cancel(); m.Stop() })
	return testManager{Manager: m, dir: dir, changes: changes}
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// res returns the snapshot of name, or a zero Resource.
func (m testManager) res(name string) Resource {
	r, _ := m.devices.resource(name)
	return r
}

// waitServing waits until name is served with n devices.
func (m testManager) waitServing(t testing.TB, name string, n int) {
	t.Helper()
	waitFor(t, name+" serving", func() bool {
		r := m.res(name)
		return r.State == StateServing && r.Capacity == n
	})
}

// podBuilder builds pods: makePod("a").ask("c", gpu, 2).obj().
type podBuilder struct{ pod *corev1.Pod }

func makePod(uid string) *podBuilder {
	return &podBuilder{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}}
}

func container(name, res string, n int64) corev1.Container {
	c := corev1.Container{Name: name}
	if res != "" {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceName(res): *apiresource.NewQuantity(n, apiresource.DecimalSI)}
	}
	return c
}

func (b *podBuilder) ask(name, res string, n int64) *podBuilder {
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, container(name, res, n))
	return b
}

func (b *podBuilder) askInit(name, res string, n int64) *podBuilder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, container(name, res, n))
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.pod }

// admit admits pod with a 5 s deadline.
func admit(t testing.TB, m testManager, pod *corev1.Pod) pods.Admission {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.Admit(ctx, pod)
}

func mustAdmit(t testing.TB, m testManager, pod *corev1.Pod) {
	t.Helper()
	if a := admit(t, m, pod); a.Verdict != pods.Admit {
		t.Fatalf("admit %s: %v %s: %s", pod.UID, a.Verdict, a.Reason, a.Message)
	}
}

func wantVerdict(t testing.TB, a pods.Admission, v pods.Verdict, reason string) {
	t.Helper()
	if a.Verdict != v || a.Reason != reason {
		t.Fatalf("admission = %v %q (%s), want %v %q", a.Verdict, a.Reason, a.Message, v, reason)
	}
}

// ids returns the devices of res held by container c of pod.
func (m testManager) ids(pod, c, res string) []string {
	return m.PodDevices(pod)[c][res]
}
