package resourceclaim

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
)

// The fencing rule against a real API server: what a node lifecycle
// controller and a node agent would write is written by the test.

// smallMargin makes the fencing rule's margin negligible in tests.
func smallMargin(o *Options) { o.FenceMargin = time.Millisecond }

// editNode applies change to the node through the API (as admin).
func (e *env) editNode(name string, change func(*corev1.Node)) {
	e.t.Helper()
	n, err := e.c.Nodes().Get(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	change(n)
	if _, err := e.c.Nodes().Update(e.ctx, n); err != nil {
		e.t.Fatalf("update node %s: %v", name, err)
	}
}

// taintUnreachable puts the unreachable NoExecute taint on the node,
// added at added (replacing an earlier one).
func (e *env) taintUnreachable(node string, added time.Time) {
	e.editNode(node, func(n *corev1.Node) {
		at := metav1.NewTime(added)
		var kept []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeUnreachable {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = append(kept, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at})
	})
}

// recordFence writes the node's fence time as its agent does.
func (e *env) recordFence(node string, d time.Duration) {
	e.editNode(node, func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[fence.AnnotationSelfFenceAfter] = d.String()
	})
}

// renewLease writes the node's heartbeat Lease with renewTime at.
func (e *env) renewLease(node string, at time.Time) {
	e.t.Helper()
	leases := e.c.Leases(corev1.NamespaceNodeLease)
	renew := metav1.NewMicroTime(at)
	l, err := leases.Get(e.ctx, node)
	if apierrors.IsNotFound(err) {
		holder, secs := node, int32(40)
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew}}
		_, err = leases.Create(e.ctx, l)
	} else if err == nil {
		l.Spec.RenewTime = &renew
		_, err = leases.Update(e.ctx, l)
	}
	if err != nil {
		e.t.Fatalf("write lease of node %s: %v", node, err)
	}
	e.t.Cleanup(func() { _ = leases.Delete(e.ctx, node, metav1.DeleteOptions{}) })
}

// tolerating is a pod that tolerates the unreachable taint for secs.
func tolerating(p *corev1.Pod, secs int64) *corev1.Pod {
	p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}}
	return p
}

// TestEvictedFromUnreachableNodeNodeLocal: a pod being deleted on an
// unreachable node keeps its node-local claim while its toleration runs,
// and loses it once the toleration has run out, although the node still
// lists the claim as prepared and records no fence time.
func TestEvictedFromUnreachableNodeNodeLocal(t *testing.T) {
	e := newEnv(t)
	node := e.createNode("n")
	claim := makeClaim("c1").obj()
	claim.Namespace = e.ns
	if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatal(err)
	}
	pod := e.createPod(tolerating(makePod("user").claim("gpu", "c1").obj(), 3600))
	e.bind(pod, node, "c1")
	e.listPrepared(e.asNode(node), node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: e.claim("c1").UID, Pods: []types.UID{pod.UID}})
	ctrl, _ := e.startController()
	e.taintUnreachable(node, time.Now())
	e.deletePod("user", nil)
	if p := e.pod("user"); p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("the bound pod is not terminating: %+v", p)
	}
	e.reservationHeld("c1")
	// The taint was added two hours ago: the hour's toleration is over.
	e.taintUnreachable(node, time.Now().Add(-2*time.Hour))
	e.eventually("the node-local claim is released", e.released("c1"))
	if n := fencedReleases(t, ctrl, devicesNodeLocal); n < 1 {
		t.Fatalf("resource_controller_fenced_releases_total{devices=%q} is %v, want at least 1", devicesNodeLocal, n)
	}
}

// TestEvictedFromUnreachableNodeMultiNode: a v1 claim on devices of all
// nodes is released from a pod evicted from an unreachable node only once
// the node records a fence time and its last heartbeat is older than
// that time plus the margin.
func TestEvictedFromUnreachableNodeMultiNode(t *testing.T) {
	e := newEnv(t)
	node := e.createNode("n")
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: e.ns}, Spec: v1ClaimSpec()}
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatal(err)
	}
	pod := e.createPod(tolerating(makePod("user").claim("gpu", "c1").obj(), 0))
	e.bindV1(pod, node, "c1") // no nodeSelector: the device is on all nodes
	if !fence.AllocationV1ReachesOtherNodes(e.claimV1("c1").Status.Allocation) {
		t.Fatal("the test's v1 allocation is node-local")
	}
	e.listPrepared(e.asNode(node), node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: e.claimV1("c1").UID, Pods: []types.UID{pod.UID}})
	ctrl, _ := e.startController(smallMargin)
	e.taintUnreachable(node, time.Now().Add(-time.Hour))
	e.deletePod("user", nil)
	held := func(what string) {
		e.consistently(what, time.Second, func() bool { return len(e.claimV1("c1").Status.ReservedFor) == 1 })
	}
	held("the multi-node claim stays reserved while the node records no fence time")
	e.renewLease(node, time.Now().Add(time.Hour))
	e.recordFence(node, time.Second)
	held("the multi-node claim stays reserved while the node's last heartbeat is recent")
	e.renewLease(node, time.Now().Add(-time.Hour))
	e.eventually("the multi-node claim is released once the fence has acted", e.releasedV1("c1"))
	e.eventually("the claim has a FencedRelease event", func() bool {
		evs, err := e.c.Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "c1").String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Reason == ReasonFencedRelease {
				return true
			}
		}
		return false
	})
	if n := fencedReleases(t, ctrl, devicesMultiNode); n < 1 {
		t.Fatalf("resource_controller_fenced_releases_total{devices=%q} is %v, want at least 1", devicesMultiNode, n)
	}
}

// fencedReleases reads resource_controller_fenced_releases_total for one
// value of its devices label (0: no series yet).
func fencedReleases(t *testing.T, c *Controller, devices string) float64 {
	t.Helper()
	families, err := c.Registry().Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "resource_controller_fenced_releases_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "devices" && l.GetValue() == devices {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestDeletedNodeMultiNode: deleting the Node releases a force-deleted
// pod's node-local claims at once (TestOutOfServiceOrDeletedNodeReleases)
// but a claim on devices other nodes can reach only once the node's
// recorded fence time plus margin has passed since its last heartbeat;
// never for a node that recorded none.
func TestDeletedNodeMultiNode(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(map[bool]string{true: "fence-recorded", false: "no-fence-time"}[recorded], func(t *testing.T) {
			e := newEnv(t)
			node := e.createNode("n")
			claim := makeClaim("c1").obj()
			claim.Namespace = e.ns
			if _, err := e.c.ResourceClaims(e.ns).Create(e.ctx, claim); err != nil {
				t.Fatal(err)
			}
			pod := e.createPod(makePod("user").claim("gpu", "c1").obj())
			e.bindMulti(pod, node, "c1")
			e.listPrepared(e.asNode(node), node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: e.claim("c1").UID, Pods: []types.UID{pod.UID}})
			e.renewLease(node, time.Now().Add(-time.Hour))
			if recorded {
				e.recordFence(node, time.Second)
			}
			e.startController(smallMargin)
			zero := int64(0)
			e.deletePod("user", &zero)
			e.reservationHeld("c1")
			if err := e.c.Nodes().Delete(e.ctx, node, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if recorded {
				e.eventually("the multi-node claim is released", e.released("c1"))
				return
			}
			e.reservationHeld("c1")
		})
	}
}

// bindMulti binds the pod with a structured allocation available on every
// node labelled fabric=a: a device other nodes can reach.
func (e *env) bindMulti(pod *corev1.Pod, node, claim string) {
	e.t.Helper()
	e.editNode(node, func(n *corev1.Node) { n.Labels = map[string]string{"fabric": "a"} })
	e.bindAvailable(pod, node, claim, node, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "fabric", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}})
	if !fence.AllocationReachesOtherNodes(e.claim(claim).Status.Allocation) {
		e.t.Fatal("the claim's allocation is node-local")
	}
}
