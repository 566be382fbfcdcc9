package cache

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

type podState struct {
	pod     *corev1.Pod
	assumed bool
}

// Cache is the scheduler's view of nodes and of the pods that hold
// resources on them: bound pods from the informer, and assumed pods that
// the scheduler placed but whose binding the informer has not shown yet.
// It is safe for concurrent use.
type Cache struct {
	mu         sync.Mutex
	nodes      map[string]*framework.NodeInfo // owned by the cache, mutated in place
	pods       map[types.UID]*podState
	generation int64

	// handed out: the clones in the last snapshot, reused while their
	// node has not changed.
	handedOut map[string]*framework.NodeInfo
	names     []string // sorted names of nodes with a Node object; nil when stale
	// last is the last snapshot, its nodes parallel to names while names
	// is not stale; dirty names the nodes changed since.
	last  *framework.Snapshot
	dirty map[string]struct{}
}

// New returns an empty cache.
func New() *Cache {
	return &Cache{
		nodes: map[string]*framework.NodeInfo{}, pods: map[types.UID]*podState{},
		handedOut: map[string]*framework.NodeInfo{}, dirty: map[string]struct{}{},
	}
}

// info returns the NodeInfo of name, creating an empty one.
func (c *Cache) info(name string) *framework.NodeInfo {
	ni, ok := c.nodes[name]
	if !ok {
		ni = framework.NewNodeInfo(nil)
		c.nodes[name] = ni
	}
	return ni
}

func (c *Cache) touch(name string, ni *framework.NodeInfo) {
	c.generation++
	ni.SetGeneration(c.generation)
	c.dirty[name] = struct{}{}
}

// AddNode adds or replaces a node.
func (c *Cache) AddNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni := c.info(node.Name)
	if ni.Node() == nil {
		c.names = nil
	}
	ni.SetNode(node)
	c.touch(node.Name, ni)
}

// UpdateNode replaces a node.
func (c *Cache) UpdateNode(node *corev1.Node) { c.AddNode(node) }

// RemoveNode removes a node. Pods still bound to it stay accounted until
// they are removed, so a node that comes back is not seen as empty.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[name]
	if !ok {
		return
	}
	c.names = nil
	delete(c.handedOut, name)
	if len(ni.Pods()) == 0 {
		delete(c.nodes, name)
		return
	}
	ni.SetNode(nil)
	c.touch(name, ni)
}

// HasNode reports whether the node is in the cache (added, not removed).
func (c *Cache) HasNode(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[name]
	return ok && ni.Node() != nil
}

// AssumePod accounts pod (spec.nodeName set) on its node before it is
// bound, so that the next cycles see the resources taken.
func (c *Cache) AssumePod(pod *corev1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("assume pod %s/%s: no node", pod.Namespace, pod.Name)
	}
	if _, ok := c.pods[pod.UID]; ok {
		return fmt.Errorf("assume pod %s/%s: already in the cache", pod.Namespace, pod.Name)
	}
	c.addLocked(pod, true)
	return nil
}

// ForgetPod removes an assumed pod whose binding failed. A pod the
// informer has meanwhile shown bound is kept.
func (c *Cache) ForgetPod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pod.UID]; ok && st.assumed {
		c.removeLocked(st.pod)
	}
}

// IsAssumed reports whether the pod is assumed and not yet confirmed.
func (c *Cache) IsAssumed(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[uid]
	return ok && st.assumed
}

// AddPod accounts a bound pod the informer reported. An assumed pod with
// the same UID is confirmed (and moved if it was bound elsewhere).
func (c *Cache) AddPod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pod.UID]; ok {
		c.removeLocked(st.pod)
	}
	c.addLocked(pod, false)
}

// UpdatePod replaces a bound pod.
func (c *Cache) UpdatePod(pod *corev1.Pod) { c.AddPod(pod) }

// RemovePod forgets a pod that was deleted or terminated.
func (c *Cache) RemovePod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pod.UID]; ok {
		c.removeLocked(st.pod)
	}
}

func (c *Cache) addLocked(pod *corev1.Pod, assumed bool) {
	ni := c.info(pod.Spec.NodeName)
	ni.AddPodInfo(framework.NewPodInfo(pod))
	c.touch(pod.Spec.NodeName, ni)
	c.pods[pod.UID] = &podState{pod: pod, assumed: assumed}
}

func (c *Cache) removeLocked(pod *corev1.Pod) {
	delete(c.pods, pod.UID)
	ni, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return
	}
	_ = ni.RemovePod(pod) // cannot fail: the pod was added to this node
	c.touch(pod.Spec.NodeName, ni)
	if ni.Node() == nil && len(ni.Pods()) == 0 {
		delete(c.nodes, pod.Spec.NodeName)
	}
}

// Snapshot returns an immutable snapshot of the nodes, cloning only the
// nodes that changed since the previous call: the previous snapshot
// itself when none did, else its nodes with the changed ones replaced.
func (c *Cache) Snapshot() *framework.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names != nil && c.last != nil {
		if len(c.dirty) == 0 {
			return c.last
		}
		infos := slices.Clone(c.last.Nodes())
		for name := range c.dirty {
			i, ok := slices.BinarySearch(c.names, name)
			if !ok {
				continue // a node without a Node object is not in snapshots
			}
			infos[i] = c.handOut(name)
		}
		clear(c.dirty)
		c.last = framework.NewSnapshotFromSortedNodeInfos(infos)
		return c.last
	}
	if c.names == nil {
		c.names = make([]string, 0, len(c.nodes))
		for name, ni := range c.nodes {
			if ni.Node() != nil {
				c.names = append(c.names, name)
			}
		}
		slices.Sort(c.names)
	}
	infos := make([]*framework.NodeInfo, len(c.names))
	for i, name := range c.names {
		infos[i] = c.handOut(name)
	}
	clear(c.dirty)
	c.last = framework.NewSnapshotFromSortedNodeInfos(infos)
	return c.last
}

// handOut returns the clone of node name for a snapshot: the one handed
// out before while the node has not changed since.
func (c *Cache) handOut(name string) *framework.NodeInfo {
	ni := c.nodes[name]
	prev, ok := c.handedOut[name]
	if !ok || prev.Generation() != ni.Generation() {
		prev = ni.Clone()
		c.handedOut[name] = prev
	}
	return prev
}

// Counts returns the number of nodes and of pods (assumed ones among
// them) in the cache.
func (c *Cache) Counts() (nodes, pods, assumed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.pods {
		if st.assumed {
			assumed++
		}
	}
	return len(c.nodes), len(c.pods), assumed
}
