package main

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// TestNodeLossEvictsPods: a node whose heartbeat Lease stops being renewed
// turns Ready=Unknown and is tainted node.kubernetes.io/unreachable
// (NoExecute) by `allot controller-manager`; its pods are evicted as their
// tolerations say (0 s: at once; 1 s: a second after the taint; none of
// its own: the API server's default, 2 s here; no seconds: never), each
// marked DisruptionTarget/DeletionByTaintManager with a
// TaintManagerEviction event. When the node is Ready again the taint comes
// off.
func TestNodeLossEvictsPods(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := clienttest.Start(ctx, allotBin, dir, "--disable", "scheduler,node,controller-manager", "--default-unreachable-toleration-seconds", "2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	c, err := client.NewForKubeconfig(cl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Two nodes: with the only node of the only zone down, no node is
	// tainted (every zone wholly disrupted: the control plane is most
	// likely the one cut off), as in Kubernetes. te-n2 keeps beating.
	const name, other = "te-n1", "te-n2"
	n, err := c.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}); err != nil {
		t.Fatal(err)
	}
	readyNode := func(name string) {
		cur, err := c.Nodes().Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		if _, err := c.Nodes().UpdateStatus(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	ready := func() { readyNode(name) }
	ready()
	readyNode(other)
	// The test is the node's agent: it renews the Lease while beating.
	var beating atomic.Bool
	beating.Store(true)
	beat := func(node string, on func() bool) {
		holder, secs := node, int32(1)
		lease, err := c.Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil {
				if on() {
					now := metav1.NowMicro()
					lease.Spec.RenewTime = &now
					if l, err := c.Leases(corev1.NamespaceNodeLease).Update(ctx, lease); err == nil {
						lease = l
					}
				}
				time.Sleep(100 * time.Millisecond) // the heartbeat interval of this fake agent
			}
		}()
	}
	beat(name, beating.Load)
	beat(other, func() bool { return true })
	pod := func(name string, tols ...corev1.Toleration) {
		if _, err := c.Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: n.Name, Tolerations: tols, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	zero, one, unreachable := int64(0), int64(1), corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	now, short := unreachable, unreachable
	now.TolerationSeconds, short.TolerationSeconds = &zero, &one
	pod("te-zero", now)
	pod("te-short", short)
	pod("te-default")
	pod("te-forever", unreachable)

	kc := componentKubeconfig(ctx, t, cl, dir, "controller-manager", "te-cm")
	metricsAddr := freeLoopbackAddr(t)
	startComponent(t, dir, "cm", nil, "controller-manager", "--kubeconfig", kc, "--node-monitor-grace-period", "700ms", "--node-monitor-period", "100ms",
		"--metrics-listen", metricsAddr)
	taint := func() *corev1.Taint {
		cur, err := c.Nodes().Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(cur.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }); i >= 0 {
			return &cur.Spec.Taints[i]
		}
		return nil
	}
	evicted := func(name string) *corev1.Pod {
		p, err := c.Pods("default").Get(ctx, name)
		if err != nil || p.DeletionTimestamp == nil {
			return nil
		}
		return p
	}

	// Heartbeats renewed through the Lease alone keep the node Ready.
	// Watched for 2 s, nearly three grace periods.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if taint() != nil {
			t.Fatal("node tainted while its Lease is renewed")
		}
		time.Sleep(100 * time.Millisecond)
	}

	beating.Store(false)
	var tn *corev1.Taint
	waitFor(t, ctx, "the unreachable taint", func() bool { tn = taint(); return tn != nil })
	if tn.Effect != corev1.TaintEffectNoExecute || tn.TimeAdded == nil {
		t.Fatalf("taint %+v, want NoExecute with timeAdded", tn)
	}
	var zeroP, shortP, defaultP *corev1.Pod
	waitFor(t, ctx, "te-zero, te-short and te-default evicted", func() bool {
		zeroP, shortP, defaultP = evicted("te-zero"), evicted("te-short"), evicted("te-default")
		return zeroP != nil && shortP != nil && defaultP != nil
	})
	// Deletion timestamps have whole seconds; timeAdded too.
	if d := shortP.DeletionTimestamp.Sub(tn.TimeAdded.Time); d < time.Second {
		t.Errorf("te-short evicted %s after the taint, before its 1 s toleration ran out", d)
	}
	if d := defaultP.DeletionTimestamp.Sub(tn.TimeAdded.Time); d < 2*time.Second {
		t.Errorf("te-default evicted %s after the taint, before its default 2 s toleration ran out", d)
	}
	for _, p := range []*corev1.Pod{zeroP, shortP, defaultP} {
		if !strings.Contains(fmtConds(p), "DeletionByTaintManager") {
			t.Errorf("%s evicted without DisruptionTarget/DeletionByTaintManager: %s", p.Name, fmtConds(p))
		}
	}
	waitFor(t, ctx, "TaintManagerEviction events", func() bool {
		evs, err := c.Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		got := 0
		for _, ev := range evs.Items {
			if ev.Reason == "TaintManagerEviction" && strings.HasPrefix(ev.InvolvedObject.Name, "te-") {
				got++
			}
		}
		return got >= 3
	})
	// te-forever tolerates the taint without a limit: watched 2 s more,
	// twice te-short's toleration, it stays.
	time.Sleep(2 * time.Second) // the absence of an eviction being shown
	if evicted("te-forever") != nil {
		t.Fatal("te-forever evicted despite its toleration without tolerationSeconds")
	}
	// The controllers' metrics count the taint and the three evictions.
	waitMetrics(ctx, t, "http://"+metricsAddr+"/metrics", "taint_eviction_controller_pod_deletions_total 3", `node_collector_evictions_total{zone=""} 1`)

	// The node is back: Ready again, the taint comes off.
	beating.Store(true)
	ready()
	waitFor(t, ctx, "the taint removed", func() bool { return taint() == nil })
	// Each change is an Event on the Node.
	for _, reason := range []string{"NodeNotReady", "NodeReady"} {
		waitFor(t, ctx, "a "+reason+" event on node "+name, func() bool {
			evs, err := c.Events("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, ev := range evs.Items {
				if ev.Reason == reason && ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == name {
					return true
				}
			}
			return false
		})
	}
}

func fmtConds(p *corev1.Pod) string {
	var out []string
	for _, c := range p.Status.Conditions {
		out = append(out, string(c.Type)+"/"+c.Reason)
	}
	return strings.Join(out, ",")
}
