package node

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/internal/node/pods"

	corev1 "allot.dev/allot/api/core/v1"
)

// ReasonWaitingForEvictedPods is the waiting reason of a pod held by the
// return gate.
const ReasonWaitingForEvictedPods = "WaitingForEvictedPods"

// returnGate is the first admitter: after the agent starts, and after a
// heartbeat failed (the node may have been unreachable, and its pods
// evicted and their claims released meanwhile), it admits nothing new
// until every pod the API server shows deleted or being deleted, or no
// longer shows, has had its containers stopped and its claims unprepared
// here: its worker has ended, and the DRA manager holds no claim for it.
// The check lists the node's pods from the API server (not the informer,
// whose relist may deliver a new pod before an old one's deletion); once
// it finds nothing pending the gate opens until the next heartbeat
// failure. Pods already admitted (adopted running ones) are not held.
type returnGate struct {
	a     *Agent
	armed atomic.Bool
}

var _ pods.Admitter = (*returnGate)(nil)

func newReturnGate(a *Agent) *returnGate {
	g := &returnGate{a: a}
	g.armed.Store(true)
	return g
}

// arm closes the gate until the next check finds nothing pending.
func (g *returnGate) arm() { g.armed.Store(true) }

// Admit holds the pod while evicted pods are still being stopped or
// unprepared.
func (g *returnGate) Admit(ctx context.Context, pod *corev1.Pod) pods.Admission {
	if !g.armed.Load() {
		return pods.Admitted()
	}
	pending, err := g.pending(ctx, pod.UID)
	if err != nil {
		return pods.HoldPod(ReasonWaitingForEvictedPods, fmt.Sprintf("list the node's pods to find evicted ones: %v", err))
	}
	if len(pending) > 0 {
		return pods.HoldPod(ReasonWaitingForEvictedPods, fmt.Sprintf(
			"waiting until %d pod(s) deleted while the node was away have been stopped and their claims unprepared", len(pending)))
	}
	g.armed.Store(false)
	return pods.Admitted()
}

// pending returns the pods (but self) that the API server shows deleted,
// being deleted, or not at all, and that still have a live worker here or
// claims prepared by the DRA manager.
func (g *returnGate) pending(ctx context.Context, self types.UID) ([]types.UID, error) {
	a := g.a
	var candidates []types.UID
	if a.disp != nil {
		candidates = append(candidates, a.disp.liveUIDs()...)
	}
	if a.dra != nil {
		candidates = append(candidates, a.dra.PreparedPods()...)
	}
	candidates = slices.DeleteFunc(candidates, func(uid types.UID) bool { return uid == self })
	if len(candidates) == 0 {
		return nil, nil // nothing here could be an evicted pod: no list needed
	}
	lctx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
	defer cancel()
	list, err := a.cfg.Client.Pods("").List(lctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.cfg.NodeName})
	if err != nil {
		return nil, err
	}
	alive := make(map[types.UID]bool, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			alive[list.Items[i].UID] = true
		}
	}
	var out []types.UID
	seen := map[types.UID]bool{}
	for _, uid := range candidates {
		if !alive[uid] && !seen[uid] {
			seen[uid] = true
			out = append(out, uid)
		}
	}
	return out, nil
}
