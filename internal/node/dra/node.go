package dra

import (
	"context"
	"fmt"
	"maps"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// nodeCache remembers this node's UID and labels: the slices' owner, and
// what claims' availableOnNodes select on. The agent registered the Node
// before the Manager starts; a failed read is retried at the next use.
type nodeCache struct {
	m *Manager

	mu     sync.Mutex
	known  bool
	uid    types.UID
	labels map[string]string
}

// refresh reads the Node from the API server.
func (c *nodeCache) refresh(ctx context.Context) error {
	actx, cancel := c.m.apiContext(ctx)
	defer cancel()
	n, err := c.m.opts.Client.Nodes().Get(actx, c.m.opts.NodeName)
	if err != nil {
		return fmt.Errorf("read node %s: %w", c.m.opts.NodeName, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known, c.uid, c.labels = true, n.UID, maps.Clone(n.Labels)
	return nil
}

// get returns the cached UID and labels, reading them first if needed.
// The labels are the caller's.
func (c *nodeCache) get(ctx context.Context) (types.UID, map[string]string, error) {
	c.mu.Lock()
	known, uid, labels := c.known, c.uid, maps.Clone(c.labels)
	c.mu.Unlock()
	if known {
		return uid, labels, nil
	}
	if err := c.refresh(ctx); err != nil {
		return "", nil, err
	}
	return c.get(ctx)
}

// forget drops the cache: the Node may have been re-created.
func (c *nodeCache) forget() {
	c.mu.Lock()
	c.known = false
	c.mu.Unlock()
}

// nodeEvent records an event about this node.
func (m *Manager) nodeEvent(typ, reason, format string, args ...any) {
	if m.opts.Events == nil {
		return
	}
	m.node.mu.Lock()
	uid := m.node.uid
	m.node.mu.Unlock()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.opts.NodeName, UID: uid}}
	m.opts.Events.Eventf(n, typ, reason, format, args...)
}
