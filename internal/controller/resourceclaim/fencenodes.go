package resourceclaim

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
)

// goneNode is what the controller remembers of a deleted node for the
// fencing rule: its recorded fence time (0: none) and last heartbeat.
type goneNode struct {
	fenceAfter time.Duration
	last       time.Time
}

// fenced applies the fencing rule (FencedRelease) to a reservation of pod
// (nil: gone) on the node named nodeName. unknown says the pod's node is
// not known (the controller never saw the pod, and no node lists the
// claim for it): it may have been a node deleted before this controller
// started, so it is judged as a deleted node that recorded the largest
// fence time known (at least fence.DefaultSelfFenceAfter) and heartbeat
// when this controller started.
func (c *Controller) fenced(ctx context.Context, pod *corev1.Pod, nodeName string, unknown, multi bool) (Verdict, error) {
	now := c.opts.Now()
	if unknown {
		return FencedRelease(nil, NodeView{Gone: true, FenceAfter: c.maxFence(), LastHeartbeat: c.startedAt}, multi, c.opts.FenceMargin, now), nil
	}
	view, err := c.nodeView(ctx, nodeName)
	if err != nil {
		return Verdict{}, err
	}
	v := FencedRelease(pod, view, multi, c.opts.FenceMargin, now)
	if !v.Release || !multi {
		return v, nil
	}
	// The caches may lag behind a heartbeat the node did write (a watch
	// of this controller broken while the node beats on): before a
	// multi-node claim goes, its last heartbeat is read from the API
	// server.
	if view, err = c.liveHeartbeat(ctx, nodeName, view); err != nil {
		return Verdict{}, err
	}
	return FencedRelease(pod, view, multi, c.opts.FenceMargin, c.opts.Now()), nil
}

// liveHeartbeat is view with the node's fence time and last heartbeat
// read again from the API server: the later of what view says and what
// the Node and its Lease say now.
func (c *Controller) liveHeartbeat(ctx context.Context, name string, view NodeView) (NodeView, error) {
	gctx, cancel := c.apiContext(ctx)
	defer cancel()
	n, err := c.c.Nodes().Get(gctx, name)
	switch {
	case apierrors.IsNotFound(err):
		n = nil
	case err != nil:
		return NodeView{}, fmt.Errorf("read node %s: %w", name, err)
	}
	lease, err := c.c.Leases(corev1.NamespaceNodeLease).Get(gctx, name)
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return NodeView{}, fmt.Errorf("read lease of node %s: %w", name, err)
	}
	if n != nil {
		view.Node, view.Gone = n, false
		view.FenceAfter, _ = fence.FenceAfter(n)
	}
	if n != nil || lease != nil {
		if last := fence.LastHeartbeat(n, lease); last.After(view.LastHeartbeat) {
			view.LastHeartbeat = last
		}
	}
	return view, nil
}

// nodeView is the fencing rule's view of a node: from the cache, else
// from the API server, else (deleted) as remembered.
func (c *Controller) nodeView(ctx context.Context, name string) (NodeView, error) {
	n, err := c.nodes.Lister().Get("", name)
	if apierrors.IsNotFound(err) {
		gctx, cancel := c.apiContext(ctx)
		n, err = c.c.Nodes().Get(gctx, name)
		cancel()
	}
	switch {
	case apierrors.IsNotFound(err):
		c.mu.Lock()
		g, ok := c.goneNodes[name]
		c.mu.Unlock()
		if !ok {
			// Deleted before this controller saw it: judged as unknown.
			return NodeView{Gone: true, FenceAfter: c.maxFence(), LastHeartbeat: c.startedAt}, nil
		}
		return NodeView{Gone: true, FenceAfter: g.fenceAfter, LastHeartbeat: g.last}, nil
	case err != nil:
		return NodeView{}, fmt.Errorf("read node %s: %w", name, err)
	}
	after, _ := fence.FenceAfter(n)
	return NodeView{Node: n, FenceAfter: after, LastHeartbeat: fence.LastHeartbeat(n, c.leaseOf(name))}, nil
}

// leaseOf is the node's heartbeat Lease from the cache, or nil.
func (c *Controller) leaseOf(node string) *coordinationv1.Lease {
	l, err := c.leases.Lister().Get(corev1.NamespaceNodeLease, node)
	if err != nil {
		return nil
	}
	return l
}

// rememberGoneNode keeps a deleted node's fence time and last heartbeat.
func (c *Controller) rememberGoneNode(n *corev1.Node) {
	after, _ := fence.FenceAfter(n)
	last := fence.LastHeartbeat(n, c.leaseOf(n.Name))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.goneNodes[n.Name] = goneNode{fenceAfter: after, last: last}
}

// maxFence is the largest fence time of the nodes known (present or
// remembered deleted), at least fence.DefaultSelfFenceAfter.
func (c *Controller) maxFence() time.Duration {
	out := fence.DefaultSelfFenceAfter
	if nodes, err := c.nodes.Lister().List(labels.Everything()); err == nil {
		for _, n := range nodes {
			if d, ok := fence.FenceAfter(n); ok {
				out = max(out, d)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.goneNodes {
		out = max(out, g.fenceAfter)
	}
	return out
}

// nodeKnown reports whether the controller knows the node of the pod.
func (c *Controller) nodeKnown(podUID types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.podNodes[podUID]
	return ok
}
