package resourceclaim

import (
	"slices"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/controller/taineviction"
	"allot.dev/allot/internal/fence"
)

// The fencing rule, the release rule's third way (docs/decisions.md,
// "Fencing"): a reservation of a pod whose node still lists the claim as
// prepared is dropped without waiting for the node when
//
//   - the node is deleted or tainted node.kubernetes.io/out-of-service:
//     at once for a claim holding only node-local devices, and for a claim
//     holding devices other nodes can reach once the node's fence has
//     surely acted (its last heartbeat older than its recorded fence time
//     plus the margin);
//   - or the node is tainted node.kubernetes.io/unreachable and the pod is
//     gone, or terminating with its toleration of that taint run out: under
//     the same condition on multi-node claims.
//
// A node that records no fence time never has a multi-node claim released
// this way: its agent may not stop the pods that hold it.

// ReasonFencedRelease is the event reason on a claim whose reservation the
// fencing rule released.
const ReasonFencedRelease = "FencedRelease"

// The label values of resource_controller_fenced_releases_total: the
// claim holds only node-local devices, or devices other nodes can reach.
const (
	devicesNodeLocal = "node_local"
	devicesMultiNode = "multi_node"
)

// NodeView is what the fencing rule knows of a consumer pod's node.
type NodeView struct {
	// Node is the node as last seen; nil when it is deleted.
	Node *corev1.Node
	// Gone says the node is deleted.
	Gone bool
	// FenceAfter is the node's recorded fence time (0: none), and
	// LastHeartbeat the later of its Lease's renewTime and its Ready
	// condition's lastHeartbeatTime, as last seen.
	FenceAfter    time.Duration
	LastHeartbeat time.Time
}

// Verdict is the fencing rule's answer for one reservation: Release, or
// when to look again (At; zero: only when something changes) and why not.
type Verdict struct {
	Release bool
	At      time.Time
	Why     string
}

// Reasons the fencing rule waits.
const (
	whyReachable     = "the node is neither unreachable, out of service nor deleted"
	whyNotEvicted    = "the pod is not being deleted"
	whyTolerates     = "the pod tolerates the node's unreachable taint for ever"
	whyToleration    = "the pod's toleration of the unreachable taint has not run out"
	whyNoFence       = "the node records no fence time, and the claim holds devices other nodes can reach"
	whyFenceNotActed = "the node's fence time plus margin has not passed since its last heartbeat"
)

// FencedRelease decides whether the reservation of pod (nil: it is gone)
// on node may be dropped without the node unpreparing the claim. multi
// says the claim holds devices other nodes can reach; margin is added to
// the node's fence time.
func FencedRelease(pod *corev1.Pod, node NodeView, multi bool, margin time.Duration, now time.Time) Verdict {
	switch {
	case node.Gone || node.Node.OutOfService():
		return afterFence(node, multi, margin, now)
	case !unreachable(node.Node):
		return Verdict{Why: whyReachable}
	case pod == nil:
		return afterFence(node, multi, margin, now) // a deleted pod tolerates nothing any more
	case pod.DeletionTimestamp == nil:
		return Verdict{Why: whyNotEvicted}
	}
	due, evict := tolerationEnds(pod, node.Node)
	switch {
	case !evict:
		return Verdict{Why: whyTolerates}
	case now.Before(due):
		return Verdict{At: due, Why: whyToleration}
	}
	return afterFence(node, multi, margin, now)
}

// afterFence releases node-local claims, and multi-node claims once the
// node's fence has acted.
func afterFence(node NodeView, multi bool, margin time.Duration, now time.Time) Verdict {
	if !multi {
		return Verdict{Release: true}
	}
	acted, at := fence.Acted(node.FenceAfter, margin, node.LastHeartbeat, now)
	switch {
	case acted:
		return Verdict{Release: true}
	case at.IsZero():
		return Verdict{Why: whyNoFence}
	}
	return Verdict{At: at, Why: whyFenceNotActed}
}

func unreachable(n *corev1.Node) bool {
	return n != nil && slices.ContainsFunc(n.Spec.Taints, isUnreachableTaint)
}

func isUnreachableTaint(t corev1.Taint) bool {
	return t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute
}

// tolerationEnds is when the pod's toleration of the node's unreachable
// taint runs out (the taint eviction controller's computation over that
// taint alone), and whether it does at all. A taint without timeAdded
// counts from the Ready condition's last transition.
func tolerationEnds(pod *corev1.Pod, node *corev1.Node) (time.Time, bool) {
	only := &corev1.Node{}
	only.Spec.Taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return !isUnreachableTaint(t) })
	since := func(corev1.Taint) time.Time {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.LastTransitionTime.Time
			}
		}
		return node.CreationTimestamp.Time
	}
	return taineviction.EvictionTime(pod, only, since)
}
