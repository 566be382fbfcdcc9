package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// claimPublisher keeps the Node's status.preparedResourceClaims in step
// with the store: every claim the Manager may have asked a driver to
// prepare, with its pods. A claim is published before its first prepare
// call (sync) and unpublished after it is unprepared (kick, or sync).
// The claim controller drops the reservation of a pod that is gone only
// while no node lists the claim for it, so a device is never prepared for
// a pod that was deleted while another pod gets it.
type claimPublisher struct {
	m *Manager
	// mu serialises writes: each writes the whole list as the store has
	// it then, so a later write never carries an older list.
	mu    sync.Mutex
	last  []corev1.PreparedResourceClaim
	known bool
	kick  chan struct{}
}

func newClaimPublisher(m *Manager) *claimPublisher {
	return &claimPublisher{m: m, kick: make(chan struct{}, 1)}
}

// preparedClaims is the store's content as the Node lists it: sorted by
// claim UID, each claim's pods sorted.
func (s *claimStore) preparedClaims() []corev1.PreparedResourceClaim {
	recs := s.snapshot()
	out := make([]corev1.PreparedResourceClaim, 0, len(recs))
	for _, r := range recs {
		if len(r.Pods) == 0 {
			continue
		}
		pc := corev1.PreparedResourceClaim{Namespace: r.Namespace, Name: r.Name, UID: r.UID}
		for _, p := range r.Pods {
			pc.Pods = append(pc.Pods, p.UID)
		}
		slices.Sort(pc.Pods)
		out = append(out, pc)
	}
	slices.SortFunc(out, func(a, b corev1.PreparedResourceClaim) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out
}

// sync writes the store's claims to the Node unless the last write did.
func (p *claimPublisher) sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := p.m.store.preparedClaims()
	if p.known && slices.EqualFunc(want, p.last, samePrepared) {
		return nil
	}
	if err := p.write(ctx, want); err != nil {
		p.known = false
		return err
	}
	p.last, p.known = want, true
	return nil
}

func samePrepared(a, b corev1.PreparedResourceClaim) bool {
	return a.UID == b.UID && a.Namespace == b.Namespace && a.Name == b.Name && slices.Equal(a.Pods, b.Pods)
}

// write replaces the Node's list (a merge patch replaces a list whole).
func (p *claimPublisher) write(ctx context.Context, want []corev1.PreparedResourceClaim) error {
	var list any = want
	if len(want) == 0 {
		list = nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"preparedResourceClaims": list}})
	if err != nil {
		return err
	}
	actx, cancel := p.m.apiContext(ctx)
	defer cancel()
	_, err = p.m.opts.Client.Nodes().Patch(actx, p.m.opts.NodeName, types.MergePatchType, patch, "status")
	if err != nil {
		return fmt.Errorf("publish prepared claims in node %s status: %w", p.m.opts.NodeName, err)
	}
	return nil
}

// later asks the run loop for a sync.
func (p *claimPublisher) later() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run syncs when kicked, retrying failures with back-off. The agent's
// heartbeats write the list too (DecorateNode), so a re-created Node, or
// one another writer changed, gets it back at the next heartbeat.
func (p *claimPublisher) run(ctx context.Context) {
	failures := 0
	for {
		err := p.sync(ctx)
		if err != nil {
			failures++
			if apierrors.IsNotFound(err) {
				p.m.node.forget()
			}
			p.m.log.Warn("DRA manager: publish prepared claims (retried)", "err", err)
			if !sleepCtx(ctx, p.m.backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
	}
}

// DecorateNode lists the prepared claims in the Node the agent registers
// or heartbeats (node.NodeDecorator), so a re-created Node has them from
// its first write and a changed list is put right at the next heartbeat.
func (m *Manager) DecorateNode(n *corev1.Node) {
	n.Status.PreparedResourceClaims = m.store.preparedClaims()
}
