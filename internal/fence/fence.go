// Package fence holds what the node agent and the claim controller share
// of the fencing rule (docs/decisions.md, "Fencing"): the names a node and
// a pod record it under, which allocations hold devices other nodes can
// reach, a node's last heartbeat, and when its fence has surely acted.
//
// The rule in one paragraph: a node agent that cannot renew its heartbeat
// Lease for its fence time (recorded on its Node) stops the pods holding
// devices other nodes can reach (and pods that opt in), and unprepares
// their claims; the claim controller releases such a pod's claims only
// once the node's last heartbeat is older than the fence time plus a
// margin. Node-local devices need no fence: no pod elsewhere can reach
// them. The package is pure: no I/O, no goroutines.
package fence

import (
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

const (
	// AnnotationSelfFenceAfter is the Node annotation in which the node
	// agent records its fence time at registration, as a Go duration
	// ("20s"). A Node without it (or with a value that does not parse as
	// a positive duration) records no fence time: the claim controller
	// then never releases its multi-node claims before the node
	// unprepares them.
	AnnotationSelfFenceAfter = corev1.AnnotationSelfFenceAfter
	// AnnotationPodFence set to "true" on a pod opts all its containers
	// into the fence: the agent stops the pod when it cannot reach the
	// API server for its fence time, whatever devices it holds.
	AnnotationPodFence = corev1.AnnotationFence

	// DefaultSelfFenceAfter is the agent's default fence time
	// (--self-fence-after).
	DefaultSelfFenceAfter = 20 * time.Second
	// DefaultMargin is what the claim controller adds to a node's fence
	// time before it trusts the fence (--fence-margin): clock skew between
	// the controller and the API server, and the time the agent takes to
	// stop a pod and unprepare its claims.
	DefaultMargin = 5 * time.Second
)

// FenceAfter is the fence time node records, and whether it records one.
func FenceAfter(node *corev1.Node) (time.Duration, bool) {
	if node == nil {
		return 0, false
	}
	v, ok := node.Annotations[AnnotationSelfFenceAfter]
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// PodOptsIn reports whether the pod asks to be fenced whatever it holds.
func PodOptsIn(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	v, err := strconv.ParseBool(pod.Annotations[AnnotationPodFence])
	return err == nil && v
}

// ReachesOtherNodes reports whether an allocation available on the nodes
// sel selects may be used by a pod on another node than the one it is
// prepared on: sel is nil (every node), or is anything but one term
// naming one node by metadata.name (how allocators write a node-local
// allocation).
func ReachesOtherNodes(sel *corev1.NodeSelector) bool {
	if sel == nil || len(sel.NodeSelectorTerms) != 1 {
		return true
	}
	t := sel.NodeSelectorTerms[0]
	if len(t.MatchExpressions) != 0 || len(t.MatchFields) != 1 {
		return true
	}
	r := t.MatchFields[0]
	return r.Key != "metadata.name" || r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1
}

// AllocationReachesOtherNodes reports whether a v1alpha2 claim's
// allocation (nil: none) holds devices other nodes can reach: its
// availableOnNodes is not one node. A control-plane driver's allocation
// without availableOnNodes is usable everywhere (seed 003), so it counts.
func AllocationReachesOtherNodes(a *resourcev1alpha2.AllocationResult) bool {
	return a != nil && ReachesOtherNodes(a.AvailableOnNodes)
}

// AllocationV1ReachesOtherNodes is AllocationReachesOtherNodes for a
// resource.k8s.io/v1 allocation: it allocates devices and its nodeSelector
// is not one node (nil: the devices are on all nodes).
func AllocationV1ReachesOtherNodes(a *resourcev1.AllocationResult) bool {
	if a == nil || len(a.Devices.Results) == 0 {
		return false
	}
	sel := a.NodeSelector
	if sel == nil || len(sel.NodeSelectorTerms) != 1 {
		return true
	}
	t := sel.NodeSelectorTerms[0]
	if len(t.MatchExpressions) != 0 || len(t.MatchFields) != 1 {
		return true
	}
	r := t.MatchFields[0]
	return r.Key != "metadata.name" || r.Operator != k8scorev1.NodeSelectorOpIn || len(r.Values) != 1
}

// LastHeartbeat is the node's last heartbeat: the later of its Ready
// condition's lastHeartbeatTime and its Lease's renewTime (lease may be
// nil); the node's creation when neither is known.
func LastHeartbeat(node *corev1.Node, lease *coordinationv1.Lease) time.Time {
	var last time.Time
	if node != nil {
		last = node.CreationTimestamp.Time
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && !c.LastHeartbeatTime.IsZero() {
				last = c.LastHeartbeatTime.Time
				break
			}
		}
	}
	if lease != nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(last) {
		last = lease.Spec.RenewTime.Time
	}
	return last
}

// Acted reports whether a node's fence has surely acted at now: it
// records a fence time (fenceAfter > 0) and its last heartbeat is older
// than fenceAfter plus margin. at is when that happens (zero when it never
// does: no fence time recorded).
func Acted(fenceAfter, margin time.Duration, last, now time.Time) (acted bool, at time.Time) {
	if fenceAfter <= 0 {
		return false, time.Time{}
	}
	at = last.Add(fenceAfter + margin)
	return now.After(at), at
}
