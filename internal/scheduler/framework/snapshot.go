package framework

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
)

// Snapshot is an immutable view of the cluster for one scheduling cycle
// (or one Diagnose): the nodes, sorted by name, each with its pods, plus
// read-only extensions that plugins keyed by name may need (the DRA
// plugin's claims and slices, later). Nothing in a Snapshot may be
// modified; WithPod and WithoutPod derive new snapshots that share every
// unchanged NodeInfo.
type Snapshot struct {
	nodes []*NodeInfo
	ext   map[string]any
}

// NewSnapshot builds a snapshot from objects, as `allot explain` and
// simulations do: every pod bound to a node (spec.nodeName set) that has
// not terminated is counted on its node; pods of unknown nodes and
// unbound pods are ignored.
func NewSnapshot(nodes []*corev1.Node, pods []*corev1.Pod) *Snapshot {
	infos := make(map[string]*NodeInfo, len(nodes))
	for _, n := range nodes {
		infos[n.Name] = NewNodeInfo(n)
	}
	for _, p := range pods {
		if ni := infos[p.Spec.NodeName]; ni != nil && !IsTerminal(p) {
			ni.AddPodInfo(NewPodInfo(p))
		}
	}
	return NewSnapshotFromNodeInfos(slices.Collect(maps.Values(infos)))
}

// NewSnapshotFromNodeInfos takes ownership of infos (callers must not
// change them afterwards); infos without a node are left out.
func NewSnapshotFromNodeInfos(infos []*NodeInfo) *Snapshot {
	out := make([]*NodeInfo, 0, len(infos))
	for _, ni := range infos {
		if ni.Node() != nil {
			out = append(out, ni)
		}
	}
	// Already sorted input (the cache's) sorts in linear time.
	slices.SortFunc(out, func(a, b *NodeInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return &Snapshot{nodes: out}
}

// NewSnapshotFromSortedNodeInfos is NewSnapshotFromNodeInfos for infos
// that are already in name order and all have a Node; the snapshot keeps
// infos, which the caller must not modify afterwards.
func NewSnapshotFromSortedNodeInfos(infos []*NodeInfo) *Snapshot {
	return &Snapshot{nodes: infos}
}

// Nodes returns the nodes in name order. Do not modify.
func (s *Snapshot) Nodes() []*NodeInfo { return s.nodes }

// Len is the number of nodes.
func (s *Snapshot) Len() int { return len(s.nodes) }

// Get returns the node called name.
func (s *Snapshot) Get(name string) (*NodeInfo, bool) {
	i, ok := s.find(name)
	if !ok {
		return nil, false
	}
	return s.nodes[i], true
}

// Index returns the position of the node called name in Nodes.
func (s *Snapshot) Index(name string) (int, bool) { return s.find(name) }

func (s *Snapshot) find(name string) (int, bool) {
	return slices.BinarySearchFunc(s.nodes, name, func(ni *NodeInfo, n string) int {
		return strings.Compare(ni.Name(), n)
	})
}

// WithPod returns a snapshot in which pod (spec.nodeName set) is on its
// node, as a simulation binds a pod.
func (s *Snapshot) WithPod(pod *corev1.Pod) (*Snapshot, error) {
	i, ok := s.find(pod.Spec.NodeName)
	if !ok {
		return nil, fmt.Errorf("add pod %s/%s: node %q not in snapshot", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	ni := s.nodes[i].Clone()
	ni.AddPodInfo(NewPodInfo(pod))
	return s.replace(i, ni), nil
}

// WithoutPod returns a snapshot without the pod (matched by UID on its
// spec.nodeName), or s itself when the pod is not there.
func (s *Snapshot) WithoutPod(pod *corev1.Pod) *Snapshot {
	i, ok := s.find(pod.Spec.NodeName)
	if !ok {
		return s
	}
	ni := s.nodes[i].Clone()
	if err := ni.RemovePod(pod); err != nil {
		return s
	}
	return s.replace(i, ni)
}

// Only returns a snapshot of just the node called name (with s's
// extensions), or false when s has no such node.
func (s *Snapshot) Only(name string) (*Snapshot, bool) {
	i, ok := s.find(name)
	if !ok {
		return nil, false
	}
	return &Snapshot{nodes: []*NodeInfo{s.nodes[i]}, ext: s.ext}, true
}

func (s *Snapshot) replace(i int, ni *NodeInfo) *Snapshot {
	nodes := slices.Clone(s.nodes)
	nodes[i] = ni
	return &Snapshot{nodes: nodes, ext: s.ext}
}

// WithExtension returns a snapshot that also carries v under key (by
// convention a plugin's name). v must be immutable.
func (s *Snapshot) WithExtension(key string, v any) *Snapshot {
	ext := maps.Clone(s.ext)
	if ext == nil {
		ext = map[string]any{}
	}
	ext[key] = v
	return &Snapshot{nodes: s.nodes, ext: ext}
}

// Extension returns what WithExtension stored under key, or nil.
func (s *Snapshot) Extension(key string) any { return s.ext[key] }

// IsTerminal reports whether the pod has finished (Succeeded or Failed):
// it no longer holds resources on its node.
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
