package client_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// cluster is the `allot up` child process every test talks to.
var cluster *clienttest.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "allot-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create temp dir:", err)
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
	cluster, err = clienttest.Start(ctx, bin, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- allot up log (tail):\n%s\n", tail(cluster.Log(), 40))
	}
	return code
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// newClient connects to the test cluster.
func newClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewForKubeconfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("NewForKubeconfig: %v", err)
	}
	return c
}

// testContext is bounded so a hung server fails the test instead of the run.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq atomic.Int64

// uniqueName appends a sequence number to base, so that the tests pass
// again with -count=N against the same cluster.
func uniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, nameSeq.Add(1))
}

// newNamespace creates a namespace for one test, named after it.
func newNamespace(t *testing.T, c *client.Client) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = uniqueName(strings.Trim(name, "-"))
	_, err := c.Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// podBuilder builds test pods: makePod("a").label("app", "x").obj().
type podBuilder struct{ p *corev1.Pod }

func makePod(name string) podBuilder {
	return podBuilder{&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}}
}

func (b podBuilder) label(k, v string) podBuilder {
	if b.p.Labels == nil {
		b.p.Labels = map[string]string{}
	}
	b.p.Labels[k] = v
	return b
}

func (b podBuilder) node(n string) podBuilder { b.p.Spec.NodeName = n; return b }

func (b podBuilder) ns(ns string) podBuilder { b.p.Namespace = ns; return b }

func (b podBuilder) obj() *corev1.Pod { return b.p }

func makeNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// eventually polls cond until it holds or 10 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
