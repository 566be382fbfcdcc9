package resourceclaim

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
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

// HoldsPrepared reports whether node keeps a claim's reservation for a
// pod that is gone: it lists the claim as prepared for the pod and is not
// out of service.
func HoldsPrepared(node *corev1.Node, claimUID, podUID types.UID) bool {
	return node != nil && !node.OutOfService() && node.Status.PreparedFor(claimUID, podUID)
}

// addNodeHandlers indexes the nodes' prepared claims and enqueues the
// claims a node stops holding (its list shrank, it was tainted out of
// service, or it was deleted).
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
			for _, pc := range old.Status.PreparedResourceClaims {
				now := cur.Status.PreparedClaim(pc.UID)
				if now == nil || cur.OutOfService() || !slices.Equal(now.Pods, pc.Pods) {
					c.enqueueClaimNamed(pc.Namespace, pc.Name)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
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
// cache nor reserved by a claim of either version any more (at resync).
func (c *Controller) forgetNodes() {
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

// preparedOn returns the node that still holds the claim with claimUID
// prepared for the gone pod with podUID, "" when none does. The watch
// cache answers when it shows a node holding it (waiting longer is safe);
// that no node does is confirmed by reads from the API server, made after
// the pod was seen gone: the pod's node when it is known (a pod's node
// never changes), otherwise every node.
func (c *Controller) preparedOn(ctx context.Context, claimUID, podUID types.UID) (string, error) {
	cached, err := c.nodes.GetIndexer().ByIndex(preparedClaimIndex, string(claimUID))
	if err != nil {
		return "", err
	}
	for _, obj := range cached {
		if n, ok := obj.(*corev1.Node); ok && HoldsPrepared(n, claimUID, podUID) {
			return n.Name, nil
		}
	}
	c.mu.Lock()
	place, known := c.podNodes[podUID]
	nodeName := place.node
	c.mu.Unlock()
	gctx, cancel := c.apiContext(ctx)
	defer cancel()
	if known {
		n, err := c.c.Nodes().Get(gctx, nodeName)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read node %s: %w", nodeName, err)
		}
		if HoldsPrepared(n, claimUID, podUID) {
			return n.Name, nil
		}
		return "", nil
	}
	list, err := c.c.Nodes().List(gctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	for i := range list.Items {
		if HoldsPrepared(&list.Items[i], claimUID, podUID) {
			return list.Items[i].Name, nil
		}
	}
	return "", nil
}

// noteWait records, once per claim, pod and node, a Normal event on the
// claim saying what the release of a gone pod's reservation waits for
// (describe claim shows it).
func (c *Controller) noteWait(claim runtimeObject, ref string, podUID types.UID, node string) {
	k := string(claim.GetUID()) + "/" + string(podUID)
	c.mu.Lock()
	seen := c.waitNoted[k] == node
	c.waitNoted[k] = node
	c.mu.Unlock()
	if seen || c.events == nil {
		return
	}
	c.events.Eventf(claim, corev1.EventTypeNormal, ReasonReleaseWaits,
		"pod %s is gone; its reservation is released once node %s has unprepared the claim (or the node is deleted or tainted %s)",
		ref, node, corev1.TaintNodeOutOfService)
}

// runtimeObject is a claim of either version.
type runtimeObject interface {
	metav1.Object
	runtime.Object
}
