package node

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

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
// After a heartbeat failure the check lists the node's pods from the API
// server (not the informer, whose relist may deliver a new pod before an
// old one's deletion); at start it reads the pod informer's store once it
// has synced (one consistent list). Once it finds nothing pending the gate
// opens until the next heartbeat failure. Pods already admitted (adopted
// running ones) are not held.
type returnGate struct {
	a     *Agent
	armed atomic.Bool
	// live: armed by a heartbeat failure, so check with a LIST.
	live atomic.Bool
	// cached returns the node's pods from the pod informer's store and
	// whether it has synced; nil before the informer exists.
	cached atomic.Pointer[func() ([]*corev1.Pod, bool, error)]
}

var _ pods.Admitter = (*returnGate)(nil)

func newReturnGate(a *Agent) *returnGate {
	g := &returnGate{a: a}
	g.armed.Store(true)
	return g
}

// arm closes the gate, after a heartbeat failure, until the next check
// (a LIST) finds nothing pending.
func (g *returnGate) arm() {
	g.live.Store(true)
	g.armed.Store(true)
}

// useCache sets where the start's check reads the node's pods.
func (g *returnGate) useCache(f func() ([]*corev1.Pod, bool, error)) { g.cached.Store(&f) }

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
	g.live.Store(false)
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
	list, err := g.nodePods(ctx)
	if err != nil {
		return nil, err
	}
	alive := make(map[types.UID]bool, len(list))
	for _, p := range list {
		if p.DeletionTimestamp == nil {
			alive[p.UID] = true
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

// nodePods returns the node's pods: from the informer's store once it has
// synced, at start; from the API server after a heartbeat failure.
func (g *returnGate) nodePods(ctx context.Context) ([]*corev1.Pod, error) {
	if f := g.cached.Load(); f != nil && !g.live.Load() {
		for {
			pods, synced, err := (*f)()
			if err != nil || synced {
				return pods, err
			}
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	a := g.a
	lctx, cancel := context.WithTimeout(ctx, a.cfg.APITimeout)
	defer cancel()
	list, err := a.cfg.Client.Pods("").List(lctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.cfg.NodeName})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
