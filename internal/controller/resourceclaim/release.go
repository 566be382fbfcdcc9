package resourceclaim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/pkg/client"
)

// The release rule: a reservation of a pod that is gone is dropped only
// once no node lists the claim as prepared for that pod
// (Node status.preparedResourceClaims, which a node agent writes before
// it asks a driver to prepare and clears after the driver unprepared),
// or the node listing it is deleted or tainted
// node.kubernetes.io/out-of-service. The agent reads the pod from the API
// server after writing its list and prepares only if the pod is there;
// the controller reads the nodes after it saw the pod gone. So when the
// controller finds no list naming the pod, no agent will prepare the
// claim for it.

// ReasonReleaseWaits is the event reason on a claim whose gone consumer's
// reservation waits for a node to unprepare it.
const ReasonReleaseWaits = "ReleaseWaitsForNode"

// preparedClaimIndex indexes nodes by the UIDs of the claims they list as
// prepared.
const preparedClaimIndex = "resourceclaim-controller-prepared-claim"

func preparedClaimKeys(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(n.Status.PreparedResourceClaims))
	for _, pc := range n.Status.PreparedResourceClaims {
		out = append(out, string(pc.UID))
	}
	return out, nil
}

// listsPrepared reports whether node lists the claim with claimUID as
// prepared for the pod with podUID.
func listsPrepared(node *corev1.Node, claimUID, podUID types.UID) bool {
	return node != nil && node.Status.PreparedFor(claimUID, podUID)
}

// addNodeHandlers indexes the nodes' prepared claims and enqueues the
// claims a node stops holding or may be released from by the fencing rule
// (its list shrank, its taints changed, or it was deleted; a deleted
// node's fence time and last heartbeat are remembered).
func (c *Controller) addNodeHandlers() error {
	if err := c.nodes.AddIndexers(cache.Indexers{preparedClaimIndex: preparedClaimKeys}); err != nil {
		return fmt.Errorf("index nodes by prepared claims: %w", err)
	}
	if _, err := c.nodes.AddEventHandler(client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Node)
			cur, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 {
				return
			}
			tainted := !slices.Equal(old.Spec.Taints, cur.Spec.Taints)
			for _, pc := range old.Status.PreparedResourceClaims {
				now := cur.Status.PreparedClaim(pc.UID)
				if now == nil || tainted || !slices.Equal(now.Pods, pc.Pods) {
					c.enqueueClaimNamed(pc.Namespace, pc.Name)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.rememberGoneNode(n)
				for _, pc := range n.Status.PreparedResourceClaims {
					c.enqueueClaimNamed(pc.Namespace, pc.Name)
				}
			}
		},
	})); err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	return nil
}

// enqueueClaimNamed enqueues the claim ns/name in whichever version it is
// stored.
func (c *Controller) enqueueClaimNamed(ns, name string) {
	if _, err := c.claims.Lister().Get(ns, name); err == nil {
		c.queue.Add(key{kindClaim, ns, name})
	}
	if _, err := c.claimsV1.Lister().Get(ns, name); err == nil {
		c.queue.Add(key{kindClaimV1, ns, name})
	}
}

// podPlace is where a pod with claims was last seen: its namespace, name
// and node.
type podPlace struct{ namespace, name, node string }

// rememberNeverBound records that a deleted pod with claims was never
// bound: its deletion's final state (not a tombstone of a relist, which
// may be older) has no node, and a pod's node is set only by a binding,
// which a pod being deleted never gets. No node can hold its claims
// prepared, so the fencing rule has nothing to wait for.
func (c *Controller) rememberNeverBound(pod *corev1.Pod) {
	if pod.Spec.NodeName != "" || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.podNodes[pod.UID]; !ok {
		c.podNodes[pod.UID] = podPlace{pod.Namespace, pod.Name, ""}
	}
}

// rememberNode records the node of a pod with claims: once the pod is
// gone, its node is the one to ask whether the claims are still prepared.
func (c *Controller) rememberNode(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.podNodes[pod.UID]; !ok {
		c.podNodes[pod.UID] = podPlace{pod.Namespace, pod.Name, pod.Spec.NodeName}
	}
}

// forgetNodes drops the remembered nodes of pods that are neither in the
// cache nor reserved by a claim of either version any more, and deleted
// nodes whose fence acted an hour ago (at resync).
func (c *Controller) forgetNodes() {
	c.mu.Lock()
	for name, g := range c.goneNodes {
		if acted, _ := fence.Acted(g.fenceAfter, c.opts.FenceMargin+time.Hour, g.last, c.opts.Now()); acted {
			delete(c.goneNodes, name)
		}
	}
	c.mu.Unlock()
	c.mu.Lock()
	places := maps.Clone(c.podNodes)
	c.mu.Unlock()
	for uid, p := range places {
		if pod, err := c.pods.Lister().Get(p.namespace, p.name); err == nil && pod.UID == uid {
			continue
		}
		key := p.namespace + "/" + string(uid)
		reserved, err := c.claims.GetIndexer().IndexKeys(reservedPodIndex, key)
		if err != nil || len(reserved) > 0 {
			continue
		}
		if reserved, err = c.claimsV1.GetIndexer().IndexKeys(reservedPodIndex, key); err != nil || len(reserved) > 0 {
			continue
		}
		c.mu.Lock()
		delete(c.podNodes, uid)
		c.mu.Unlock()
	}
}

// preparedOn returns the node that lists the claim with claimUID as
// prepared for the gone pod with podUID, "" when none does; gone says the
// pod's node (returned) is deleted. The watch cache answers when it shows
// a node listing it (waiting longer is safe); that no node does is
// confirmed by reads from the API server, made after the pod was seen
// gone: the pod's node when it is known (a pod's node never changes),
// otherwise every node.
func (c *Controller) preparedOn(ctx context.Context, claimUID, podUID types.UID) (node string, gone bool, err error) {
	cached, err := c.nodes.GetIndexer().ByIndex(preparedClaimIndex, string(claimUID))
	if err != nil {
		return "", false, err
	}
	for _, obj := range cached {
		if n, ok := obj.(*corev1.Node); ok && listsPrepared(n, claimUID, podUID) {
			return n.Name, false, nil
		}
	}
	c.mu.Lock()
	place, known := c.podNodes[podUID]
	nodeName := place.node
	c.mu.Unlock()
	if known && nodeName == "" {
		return "", false, nil // never bound (rememberNeverBound)
	}
	gctx, cancel := c.apiContext(ctx)
	defer cancel()
	if known {
		n, err := c.c.Nodes().Get(gctx, nodeName)
		if apierrors.IsNotFound(err) {
			return nodeName, true, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("read node %s: %w", nodeName, err)
		}
		if listsPrepared(n, claimUID, podUID) {
			return n.Name, false, nil
		}
		return "", false, nil
	}
	list, err := c.c.Nodes().List(gctx, metav1.ListOptions{})
	if err != nil {
		return "", false, fmt.Errorf("list nodes: %w", err)
	}
	for i := range list.Items {
		if listsPrepared(&list.Items[i], claimUID, podUID) {
			return list.Items[i].Name, false, nil
		}
	}
	return "", false, nil
}

// noteWait records, once per claim, pod, node and reason, a Normal event
// on the claim saying what the release of a gone pod's reservation waits
// for (describe claim shows it).
func (c *Controller) noteWait(claim runtimeObject, ref string, podUID types.UID, node, why string) {
	k := string(claim.GetUID()) + "/" + string(podUID)
	c.mu.Lock()
	seen := c.waitNoted[k] == node+"/"+why
	c.waitNoted[k] = node + "/" + why
	c.mu.Unlock()
	if seen || c.events == nil {
		return
	}
	if node == "" {
		node = "(unknown)"
	}
	c.events.Eventf(claim, corev1.EventTypeNormal, ReasonReleaseWaits,
		"pod %s is gone; its reservation is released once node %s has unprepared the claim (or the node is deleted or tainted %s, subject to the fencing rule: %s)",
		ref, node, corev1.TaintNodeOutOfService, why)
}

// runtimeObject is a claim of either version.
type runtimeObject interface {
	metav1.Object
	runtime.Object
}
