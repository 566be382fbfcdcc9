package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// Timers of the leader election tests: the smallest client-go accepts with
// a Lease's whole seconds.
var fastElection = []string{"--leader-elect", "--leader-elect-lease-duration", "1s",
	"--leader-elect-renew-deadline", "500ms", "--leader-elect-retry-period", "100ms"}

// TestLeaderElection runs two schedulers and two controller managers with
// --leader-elect against a control plane that runs neither, each with its
// own role's token: one of each leads (its Lease in kube-system names it),
// the other waits; after a kill -9 of the leader the standby takes the
// Lease and does the work (a pod is bound, a namespace is finalized).
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := clienttest.Start(ctx, allotBin, dir, "--disable", "scheduler,node,controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	rc, err := clientcmd.BuildConfigFromFlags("", cl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	c, err := client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigFor := func(role string) string { return componentKubeconfig(ctx, t, cl, dir, role, "le-"+role) }
	metricsAddr := map[string]string{}
	start := func(component, id, kubeconfig string, extra ...string) *exec.Cmd {
		metricsAddr[id] = freeLoopbackAddr(t)
		args := append([]string{component, "--kubeconfig", kubeconfig, "--leader-elect-identity", id, "--metrics-listen", metricsAddr[id]}, fastElection...)
		return startComponent(t, dir, id, nil, append(args, extra...)...)
	}
	logOf := func(id string) string { return componentLog(dir, id) }
	holder := func(name string) string {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			t.Fatalf("get lease %s: %v", name, err)
		}
		return ptrOr(l.Spec.HolderIdentity)
	}
	waitHolder := func(name string, want ...string) string {
		var got string
		waitFor(t, ctx, fmt.Sprintf("lease kube-system/%s held by one of %v", name, want), func() bool {
			got = holder(name)
			for _, w := range want {
				if got == w {
					return true
				}
			}
			return false
		})
		return got
	}

	schedKC, cmKC := kubeconfigFor("scheduler"), kubeconfigFor("controller-manager")
	scheds := map[string]*exec.Cmd{
		"sched-a": start("scheduler", "sched-a", schedKC, "--scheduler-name", "le-test"),
		"sched-b": start("scheduler", "sched-b", schedKC, "--scheduler-name", "le-test"),
	}
	cms := map[string]*exec.Cmd{
		"cm-a": start("controller-manager", "cm-a", cmKC),
		"cm-b": start("controller-manager", "cm-b", cmKC),
	}
	other := func(id string) string {
		return map[string]string{"sched-a": "sched-b", "sched-b": "sched-a", "cm-a": "cm-b", "cm-b": "cm-a"}[id]
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "le-n1"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("10")},
		Capacity:    corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("10")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
	if _, err := c.Nodes().Create(ctx, node); err != nil {
		t.Fatalf("create node: %v", err)
	}
	bound := func(name string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{SchedulerName: "le-test",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := c.Pods("default").Create(ctx, pod); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		waitFor(t, ctx, "pod "+name+" bound", func() bool {
			p, err := c.Pods("default").Get(ctx, name)
			return err == nil && p.Spec.NodeName == "le-n1"
		})
	}
	finalized := func(name string) {
		if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatalf("create namespace %s: %v", name, err)
		}
		if err := c.Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete namespace %s: %v", name, err)
		}
		waitFor(t, ctx, "namespace "+name+" finalized and gone", func() bool {
			_, err := c.Namespaces().Get(ctx, name)
			return apierrors.IsNotFound(err)
		})
	}

	sLead := waitHolder("allot-scheduler", "sched-a", "sched-b")
	cLead := waitHolder("allot-controller-manager", "cm-a", "cm-b")
	// The leaders say so in their metrics, as Kubernetes components do.
	leads := func(id, lease string) {
		waitMetrics(ctx, t, "http://"+metricsAddr[id]+"/metrics", `leader_election_master_status{name="`+lease+`"} 1`)
	}
	leads(sLead, "allot-scheduler")
	leads(cLead, "allot-controller-manager")
	bound("before")
	finalized("le-before")
	for _, id := range []string{other(sLead), other(cLead)} {
		if strings.Contains(logOf(id), "became leader") {
			t.Fatalf("%s leads beside %s/%s:\n%s", id, sLead, cLead, logOf(id))
		}
	}

	// kill -9 both leaders: no lease is given back, the standbys wait out
	// the lease duration.
	for _, p := range []*exec.Cmd{scheds[sLead], cms[cLead]} {
		if err := syscall.Kill(-p.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	waitHolder("allot-scheduler", other(sLead))
	waitHolder("allot-controller-manager", other(cLead))
	leads(other(sLead), "allot-scheduler")
	leads(other(cLead), "allot-controller-manager")
	bound("after")
	finalized("le-after")
	// Each takeover is an Event on the Lease, as Kubernetes components
	// record it.
	for _, id := range []string{other(sLead), other(cLead)} {
		waitFor(t, ctx, "a LeaderElection event naming "+id, func() bool {
			evs, err := c.Events("kube-system").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, ev := range evs.Items {
				if ev.Reason == "LeaderElection" && ev.InvolvedObject.Kind == "Lease" && strings.Contains(ev.Message, id+" became leader") {
					return true
				}
			}
			return false
		})
	}

	// A lease written with the controller manager's token elsewhere is
	// refused: each component holds only its own.
	cmRC, err := clientcmd.BuildConfigFromFlags("", cmKC)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(cmRC).CoordinationV1().Leases("kube-system").Create(ctx,
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "allot-scheduler-2"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("controller manager created another lease: err %v, want 403", err)
	}
}

// TestLeaderElectionFlagsChecked: timers client-go would refuse are
// refused at start, naming the flag.
func TestLeaderElectionFlagsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--leader-elect-lease-duration", "500ms"}, "--leader-elect-lease-duration 500ms: must be at least 1s"},
		{[]string{"--leader-elect-renew-deadline", "15s"}, "must be greater than --leader-elect-renew-deadline 15s"},
		{[]string{"--leader-elect-retry-period", "9s"}, "--leader-elect-renew-deadline 10s: must be greater than 1.2 × --leader-elect-retry-period 9s"},
	} {
		for _, component := range []string{"scheduler", "controller-manager"} {
			args := append([]string{component, "--kubeconfig", testCluster.Kubeconfig, "--leader-elect"}, tc.args...)
			res := runTool(t, allotBin, "", args...)
			if res.err == nil || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("allot %v: err %v, stderr %q; want a failure saying %q", args, res.err, res.stderr, tc.want)
			}
		}
	}
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-tick.C:
		}
	}
}
