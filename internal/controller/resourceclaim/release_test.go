package resourceclaim

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// asNode returns a client with the identity of node name, made as an
// operator makes it (`allot token create --role node`).
func (e *env) asNode(name string) *client.Client { return e.as("node", name) }

// as returns a client with a new token of role and name.
func (e *env) as(role, name string) *client.Client {
	e.t.Helper()
	out, err := exec.CommandContext(e.ctx, allotBin, "token", "create", "--data-dir", cluster.DataDir,
		"--role", role, "--name", name).Output()
	if err != nil {
		e.t.Fatalf("allot token create: %v", err)
	}
	rc, err := client.LoadRESTConfig(cluster.Kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	rc.BearerToken, rc.BearerTokenFile = strings.TrimSpace(string(out)), ""
	c, err := client.NewForConfig(rc)
	if err != nil {
		e.t.Fatal(err)
	}
	// The token file is re-read by the server: wait until it knows it.
	e.eventually("the new token is accepted", func() bool {
		_, err := c.Nodes().List(e.ctx, metav1.ListOptions{Limit: 1})
		return err == nil || !apierrors.IsUnauthorized(err)
	})
	return c
}

// listPrepared writes the node's status.preparedResourceClaims as its
// agent does.
func (e *env) listPrepared(nc *client.Client, node string, claims ...corev1.PreparedResourceClaim) {
	e.t.Helper()
	var list any = claims
	if len(claims) == 0 {
		list = nil
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"preparedResourceClaims": list}})
	if _, err := nc.Nodes().Patch(e.ctx, node, types.MergePatchType, patch, "status"); err != nil {
		e.t.Fatalf("write node %s status.preparedResourceClaims: %v", node, err)
	}
}

// reservationHeld watches for 1s that the claim's reservation stays: the
// controller's resync runs every 200ms in these tests and its retries
// are at most 200ms apart, so it re-decides several times meanwhile.
func (e *env) reservationHeld(name string) {
	e.t.Helper()
	e.consistently("the gone pod's reservation stays while its node holds the claim prepared", time.Second, func() bool {
		return len(e.claim(name).Status.ReservedFor) == 1
	})
}

// TestForceDeletedPodReleaseWaitsForNode: a pod removed at once (force
// deletion) keeps its reservation while its node lists the claim as
// prepared for it; the claim says so in an event; the reservation goes
// when the node's list drops it. A controller that never saw the pod
// (started after its deletion) finds the node by listing nodes.
func TestForceDeletedPodReleaseWaitsForNode(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := map[bool]string{false: "pod-node-known", true: "controller-started-after-deletion"}[restart]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			pod := e.boundClaim(makeClaim("c1").obj(), "user")
			node := pod.Spec.NodeName
			nc := e.asNode(node)
			claim := e.claim("c1")
			e.listPrepared(nc, node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: claim.UID, Pods: []types.UID{pod.UID}})
			var stop func()
			if !restart {
				_, stop = e.startController()
			}
			zero := int64(0)
			e.deletePod("user", &zero)
			if restart {
				_, stop = e.startController()
			}
			e.reservationHeld("c1")
			e.eventually("the claim has an event naming the node", func() bool {
				evs, err := e.c.Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "c1").String()})
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs.Items {
					if ev.Reason == ReasonReleaseWaits && strings.Contains(ev.Message, node) {
						return true
					}
				}
				return false
			})
			// A status write by anyone but the node (or an admin) keeps
			// the list as stored.
			cm := e.as("controller-manager", "controller-manager")
			n, err := cm.Nodes().Get(e.ctx, node)
			if err != nil {
				t.Fatal(err)
			}
			n.Status.PreparedResourceClaims = nil
			if _, err := cm.Nodes().UpdateStatus(e.ctx, n); err != nil {
				t.Fatalf("controller-manager status update: %v", err)
			}
			if n, _ = e.c.Nodes().Get(e.ctx, node); !n.Status.PreparedFor(claim.UID, pod.UID) {
				t.Fatalf("the controller manager's status update removed the node's prepared claims: %+v", n.Status.PreparedResourceClaims)
			}
			e.reservationHeld("c1")
			e.listPrepared(nc, node)
			e.eventually("the claim is released once the node unprepared it", e.released("c1"))
			stop()
		})
	}
}

// TestOutOfServiceOrDeletedNodeReleases: the operator's statements that a
// node is down (the out-of-service taint, or deleting the Node) release
// what it listed.
func TestOutOfServiceOrDeletedNodeReleases(t *testing.T) {
	for _, how := range []string{"taint", "delete"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			pod := e.boundClaim(makeClaim("c1").obj(), "user")
			node := pod.Spec.NodeName
			nc := e.asNode(node)
			e.listPrepared(nc, node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: e.claim("c1").UID, Pods: []types.UID{pod.UID}})
			e.startController()
			zero := int64(0)
			e.deletePod("user", &zero)
			e.reservationHeld("c1")
			switch how {
			case "taint":
				n, err := e.c.Nodes().Get(e.ctx, node)
				if err != nil {
					t.Fatal(err)
				}
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
				if _, err := e.c.Nodes().Update(e.ctx, n); err != nil {
					t.Fatal(err)
				}
			case "delete":
				if err := e.c.Nodes().Delete(e.ctx, node, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			e.eventually("the claim is released", e.released("c1"))
		})
	}
}

// TestV1ForceDeletedPodReleaseWaitsForNode: the same rule for a claim
// stored as resource.k8s.io/v1.
func TestV1ForceDeletedPodReleaseWaitsForNode(t *testing.T) {
	e := newEnv(t)
	node := e.createNode("user")
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: e.ns}, Spec: v1ClaimSpec()}
	if _, err := e.c.ResourceClaimsV1(e.ns).Create(e.ctx, claim); err != nil {
		t.Fatalf("create v1 claim: %v", err)
	}
	pod := e.createPod(makePod("user").claim("gpu", "c1").obj())
	e.bindV1(pod, node, "c1")
	nc := e.asNode(node)
	e.listPrepared(nc, node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: e.claimV1("c1").UID, Pods: []types.UID{pod.UID}})
	e.startController()
	zero := int64(0)
	e.deletePod("user", &zero)
	e.consistently("the gone pod's reservation of the v1 claim stays while its node holds it", time.Second, func() bool {
		return len(e.claimV1("c1").Status.ReservedFor) == 1
	})
	e.listPrepared(nc, node)
	e.eventually("the v1 claim is released", e.releasedV1("c1"))
}

// TestControlPlaneClaimReleaseWaitsForNode: a control-plane claim's
// driver is asked to deallocate only once the node that lists it as
// prepared for a force-deleted pod stops listing it.
func TestControlPlaneClaimReleaseWaitsForNode(t *testing.T) {
	e := newEnv(t)
	class := e.cpClass()
	node := e.createNode("user")
	pod := e.createPod(makePod("user").claim("net", "c1").obj())
	pod.Spec.NodeName = node
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: e.ns}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	b.APIVersion, b.Kind = "v1", "Binding"
	if _, err := e.c.Bind(e.ctx, e.ns, pod.Name, b); err != nil {
		t.Fatalf("bind: %v", err)
	}
	e.driverAllocate(makeClaim("c1"), class, pod)
	nc := e.asNode(node)
	e.listPrepared(nc, node, corev1.PreparedResourceClaim{Namespace: e.ns, Name: "c1", UID: e.claim("c1").UID, Pods: []types.UID{pod.UID}})
	e.startController()
	zero := int64(0)
	e.deletePod("user", &zero)
	e.consistently("the control-plane claim stays reserved while its node holds it", time.Second, func() bool {
		c := e.claim("c1")
		return len(c.Status.ReservedFor) == 1 && !c.Status.DeallocationRequested
	})
	e.listPrepared(nc, node)
	e.eventually("reservation dropped and deallocation requested", func() bool {
		c := e.claim("c1")
		return len(c.Status.ReservedFor) == 0 && c.Status.DeallocationRequested
	})
}
