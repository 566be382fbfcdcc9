package main

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/client/clienttest"
)

// TestFenceReleasesAfterNodeLoss: `allot controller-manager` alone takes a
// node that stops heartbeating from the unreachable taint through the
// eviction of its pods to the release of their claims: the claim on a
// node-local device at once, the claim on a device of all nodes only once
// the node's recorded fence time (1 s) plus --fence-margin (500 ms) has
// passed since its last heartbeat.
func TestFenceReleasesAfterNodeLoss(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := clienttest.Start(ctx, allotBin, dir, "--disable", "scheduler,node,controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	c, err := client.NewForKubeconfig(cl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Two nodes: fe-n2 keeps beating, so the zone is not wholly down.
	const name, other = "fe-n1", "fe-n2"
	var beating atomic.Bool
	beating.Store(true)
	for _, n := range []string{name, other} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if n == name {
			node.Annotations = map[string]string{fence.AnnotationSelfFenceAfter: "1s"}
		}
		if _, err := c.Nodes().Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		cur, err := c.Nodes().Get(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		if _, err := c.Nodes().UpdateStatus(ctx, cur); err != nil {
			t.Fatal(err)
		}
		on := func() bool { return true }
		if n == name {
			on = beating.Load
		}
		fenceBeat(ctx, t, c, n, on)
	}
	zero := int64(0)
	tolerate := []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &zero}}
	bindV1Claim(ctx, t, c, "fe-local", name, tolerate, nodeSelectorFor(name))
	bindV1Claim(ctx, t, c, "fe-shared", name, tolerate, nil)

	kc := componentKubeconfig(ctx, t, cl, dir, "controller-manager", "fe-cm")
	startComponent(t, dir, "cm", nil, "controller-manager", "--kubeconfig", kc,
		"--node-monitor-grace-period", "700ms", "--node-monitor-period", "100ms", "--fence-margin", "500ms")
	released := func(claim string) bool {
		rc, err := c.ResourceClaimsV1("default").Get(ctx, claim)
		return err == nil && len(rc.Status.ReservedFor) == 0 && rc.Status.Allocation == nil
	}

	beating.Store(false)
	waitFor(t, ctx, "the node tainted unreachable", func() bool {
		n, err := c.Nodes().Get(ctx, name)
		return err == nil && len(n.Spec.Taints) > 0
	})
	lease, err := c.Leases(corev1.NamespaceNodeLease).Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	last := lease.Spec.RenewTime.Time
	waitFor(t, ctx, "the node-local claim released", func() bool { return released("fe-local-claim") })
	// Each look that finds the multi-node claim released comes after the
	// release: finding it before last + fence + margin is a violation.
	waitFor(t, ctx, "the multi-node claim released", func() bool {
		if !released("fe-shared-claim") {
			return false
		}
		if now := time.Now(); now.Before(last.Add(1500 * time.Millisecond)) {
			t.Fatalf("the multi-node claim was released %s after the node's last heartbeat, before its fence time plus margin (1.5s)", now.Sub(last))
		}
		t.Logf("multi-node claim seen released %s after the node's last heartbeat", time.Since(last).Round(time.Millisecond))
		return true
	})
	for _, p := range []string{"fe-local", "fe-shared"} {
		pod, err := c.Pods("default").Get(ctx, p)
		if err != nil || pod.DeletionTimestamp == nil {
			t.Fatalf("pod %s: %v; want it evicted and terminating (no agent completes it)", p, err)
		}
	}
}

// fenceBeat renews the node's heartbeat Lease every 100ms while on says
// so, as the node's agent would.
func fenceBeat(ctx context.Context, t *testing.T, c *client.Client, node string, on func() bool) {
	t.Helper()
	holder, secs := node, int32(1)
	now := metav1.NowMicro()
	lease, err := c.Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond) // this fake agent's heartbeat interval
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !on() {
				continue
			}
			now := metav1.NowMicro()
			lease.Spec.RenewTime = &now
			if l, err := c.Leases(corev1.NamespaceNodeLease).Update(ctx, lease); err == nil {
				lease = l
			}
		}
	}()
}

// bindV1Claim creates the v1 claim POD-claim and pod POD tolerating tols,
// and binds the pod to node with an allocation of one device available on
// the nodes sel selects (nil: all).
func bindV1Claim(ctx context.Context, t *testing.T, c *client.Client, pod, node string, tols []corev1.Toleration, sel *k8scorev1.NodeSelector) {
	t.Helper()
	claimName := pod + "-claim"
	if _, err := c.ResourceClaimsV1("default").Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dev.example.com"}}}}}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod}, Spec: corev1.PodSpec{
		Tolerations: tols, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: &claimName}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(&resourcev1.AllocationResult{NodeSelector: sel, Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "dev", Driver: "dev.example.com", Pool: pod, Device: "d0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bind(ctx, "default", pod, &corev1.Binding{
		ObjectMeta:       metav1.ObjectMeta{Name: pod},
		Target:           corev1.ObjectReference{Kind: "Node", Name: node},
		ResourceClaims:   []corev1.BindingResourceClaim{{Name: claimName, Allocation: &runtime.RawExtension{Raw: raw}}},
		AllocationFences: []corev1.AllocationFence{{NodeName: node, DriverName: "dev.example.com", Revision: p.ResourceVersion}},
	}); err != nil {
		t.Fatalf("bind pod %s: %v", pod, err)
	}
}
