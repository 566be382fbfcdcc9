package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/storage/storagetest"
	"allot.dev/allot/pkg/client"
)

// TestTwoAPIServersOneDies: two API servers over one external etcd,
// sharing the cluster's CA and tokens; a scheduler and a controller
// manager are given both with --api-servers. Once the first API server is
// killed (SIGKILL), the components keep working through the second: a pod
// created after the kill is bound, a namespace deleted after it is
// finalized.
func TestTwoAPIServersOneDies(t *testing.T) {
	t.Parallel()
	endpoints, _ := storagetest.StartExternalCluster(t, 1)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "KUBECONFIG=")
	start := func(name string, args ...string) *exec.Cmd { return startComponent(t, dir, name, env, args...) }
	apiserver := func(name string) (*exec.Cmd, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		cmd := start(name, "apiserver", "--data-dir", filepath.Join(dir, name), "--listen", "127.0.0.1:"+port,
			"--etcd-servers", strings.Join(endpoints, ","))
		return cmd, "https://127.0.0.1:" + port
	}
	ready := func(kc, url string) *client.Client {
		rc, err := client.LoadRESTConfig(kc)
		if err != nil {
			t.Fatal(err)
		}
		rc.Host = url
		c, err := client.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "API server "+url+" ready", func() bool {
			_, err := c.RESTClient(corev1.SchemeGroupVersion).Get().AbsPath("/readyz").DoRaw(ctx)
			return err == nil
		})
		return c
	}

	a, urlA := apiserver("a")
	kc := filepath.Join(dir, "a", "kubeconfig")
	waitFor(t, ctx, "the first API server's kubeconfig", func() bool { _, err := os.Stat(kc); return err == nil })
	ready(kc, urlA)
	// The second shares the first's CA and tokens, as an operator copies
	// them to every control-plane host.
	for _, f := range []string{"pki/ca.crt", "pki/ca.key", "tokens.csv"} {
		b, err := os.ReadFile(filepath.Join(dir, "a", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "b", f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, urlB := apiserver("b")
	cb := ready(kc, urlB)

	servers := urlA + "," + urlB
	start("scheduler", "scheduler", "--kubeconfig", kc, "--api-servers", servers)
	start("controller-manager", "controller-manager", "--kubeconfig", kc, "--api-servers", servers)

	res := corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("10")}
	node, err := cb.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ha-n1"}})
	if err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{Allocatable: res, Capacity: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if _, err := cb.Nodes().UpdateStatus(ctx, node); err != nil {
		t.Fatal(err)
	}
	works := func(suffix string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + suffix}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := cb.Pods("default").Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "pod p-"+suffix+" bound", func() bool {
			p, err := cb.Pods("default").Get(ctx, "p-"+suffix)
			return err == nil && p.Spec.NodeName == "ha-n1"
		})
		ns := "ns-" + suffix
		if _, err := cb.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := cb.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "namespace "+ns+" finalized", func() bool {
			_, err := cb.Namespaces().Get(ctx, ns)
			return apierrors.IsNotFound(err)
		})
	}
	works("before")
	if err := syscall.Kill(-a.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	works("after")
	for _, name := range []string{"scheduler", "controller-manager"} {
		if log := componentLog(dir, name); !strings.Contains(log, "using another") {
			t.Errorf("%s did not log a switch to the second API server:\n%s", name, log)
		}
	}
}
