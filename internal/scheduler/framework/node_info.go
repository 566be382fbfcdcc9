package framework

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// PodInfo is a pod on a node with its requests computed once.
type PodInfo struct {
	Pod *corev1.Pod
	// Requests is PodRequests(Pod); NonZero is PodRequestsNonZero(Pod).
	Requests Resource
	NonZero  Resource
}

// NewPodInfo computes a pod's requests.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	return &PodInfo{Pod: pod, Requests: PodRequests(pod), NonZero: PodRequestsNonZero(pod)}
}

// NodeInfo is a node with the pods bound (or assumed) to it and the
// resources they request. A NodeInfo inside a Snapshot is immutable:
// plugins read it concurrently. The cache and snapshot builders mutate
// their own NodeInfos through AddPod, RemovePod and SetNode and hand out
// clones.
type NodeInfo struct {
	node        *corev1.Node
	name        string // of node; with the flags below, read by every cycle without touching node
	cordoned    bool   // node.spec.unschedulable
	ready       bool   // node's Ready condition is True
	pods        []*PodInfo
	requested   Resource
	nonZero     Resource
	allocatable Resource
	generation  int64
}

// NewNodeInfo builds a NodeInfo for node (nil: pods whose node the cache
// has not seen yet) holding pods.
func NewNodeInfo(node *corev1.Node, pods ...*corev1.Pod) *NodeInfo {
	n := &NodeInfo{}
	n.SetNode(node)
	for _, p := range pods {
		n.AddPodInfo(NewPodInfo(p))
	}
	return n
}

// Node returns the node; nil for a NodeInfo that only holds pods.
func (n *NodeInfo) Node() *corev1.Node { return n.node }

// Name returns the node's name, or "" without a node.
func (n *NodeInfo) Name() string { return n.name }

// Cordoned reports the node's spec.unschedulable.
func (n *NodeInfo) Cordoned() bool { return n.cordoned }

// Ready reports whether the node's Ready condition is True.
func (n *NodeInfo) Ready() bool { return n.ready }

// Pods returns the pods on the node. Do not modify.
func (n *NodeInfo) Pods() []*PodInfo { return n.pods }

// Requested is the sum of the pods' requests (Pods: their count).
func (n *NodeInfo) Requested() Resource { return n.requested }

// NonZeroRequested is the sum of PodRequestsNonZero of the pods.
func (n *NodeInfo) NonZeroRequested() Resource { return n.nonZero }

// Allocatable is the node's status.allocatable.
func (n *NodeInfo) Allocatable() Resource { return n.allocatable }

// Generation increases with every change; the cache uses it to clone only
// what changed into the next snapshot.
func (n *NodeInfo) Generation() int64 { return n.generation }

// SetGeneration records the cache's generation of the last change.
func (n *NodeInfo) SetGeneration(g int64) { n.generation = g }

// SetNode replaces the node object.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	n.node = node
	n.name, n.cordoned, n.ready = "", false, false
	n.allocatable = Resource{}
	if node != nil {
		n.name, n.cordoned = node.Name, node.Spec.Unschedulable
		n.ready = slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		n.allocatable = NewResource(node.Status.Allocatable)
	}
}

// AddPodInfo adds a pod's requests to the node.
func (n *NodeInfo) AddPodInfo(p *PodInfo) {
	n.pods = append(n.pods, p)
	n.requested.Add(p.Requests)
	n.nonZero.Add(p.NonZero)
}

// RemovePod removes the pod with pod's UID.
func (n *NodeInfo) RemovePod(pod *corev1.Pod) error {
	return n.RemovePodByUID(pod.UID)
}

// RemovePodByUID removes the pod with that UID.
func (n *NodeInfo) RemovePodByUID(uid types.UID) error {
	for i, p := range n.pods {
		if p.Pod.UID != uid {
			continue
		}
		last := len(n.pods) - 1
		n.pods[i] = n.pods[last]
		n.pods[last] = nil
		n.pods = n.pods[:last]
		n.requested.Sub(p.Requests)
		n.nonZero.Sub(p.NonZero)
		return nil
	}
	return fmt.Errorf("pod %s not on node %q", uid, n.Name())
}

// Clone returns a copy that can be changed without affecting n. The pod
// objects themselves are shared.
func (n *NodeInfo) Clone() *NodeInfo {
	cp := &NodeInfo{
		node: n.node, name: n.name, cordoned: n.cordoned, ready: n.ready, pods: append([]*PodInfo(nil), n.pods...),
		requested: n.requested.Clone(), nonZero: n.nonZero.Clone(),
		allocatable: n.allocatable.Clone(), generation: n.generation,
	}
	return cp
}
