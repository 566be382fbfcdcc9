package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

// orphanGrace is the grace period of containers whose pod is gone; capped
// by the configured maximum grace period.
const orphanGrace = 30 * time.Second

// relister lists the runtime's containers periodically (the kubelet's
// PLEG): a pod whose containers changed since the last list has its
// worker woken; containers of pods without a worker are orphans and are
// stopped and removed. Only the relist goroutine touches it.
type relister struct {
	a    *Agent
	prev map[types.UID]string // per pod: fingerprint of its containers
	// cleaning is set while a goroutine removes orphans, so that a slow
	// stop neither delays the relist nor runs twice.
	cleaning atomic.Bool
}

func (a *Agent) relistLoop(ctx context.Context) {
	r := &relister{a: a, prev: map[types.UID]string{}}
	t := time.NewTicker(a.cfg.RelistInterval)
	defer t.Stop()
	for {
		if err := r.relist(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("list containers", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *relister) relist(ctx context.Context) error {
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, r.a.cfg.Pods.RuntimeTimeout)
	list, err := r.a.cfg.Runtime.List(lctx)
	cancel()
	r.a.cfg.Metrics.RelistDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("relist: %w", err)
	}
	byPod := map[types.UID][]runtime.ContainerStatus{}
	for _, c := range list {
		byPod[types.UID(c.PodUID)] = append(byPod[types.UID(c.PodUID)], c)
	}
	cur := make(map[types.UID]string, len(byPod))
	var orphans []runtime.ContainerStatus
	for uid, cs := range byPod {
		fp := fingerprint(cs)
		cur[uid] = fp
		if !r.a.disp.has(uid) {
			orphans = append(orphans, cs...)
			continue
		}
		if r.prev[uid] != fp {
			r.a.disp.poke(uid)
		}
	}
	for uid := range r.prev {
		if _, ok := cur[uid]; !ok {
			r.a.disp.poke(uid)
		}
	}
	r.prev = cur
	if len(orphans) > 0 && r.cleaning.CompareAndSwap(false, true) {
		go func() {
			defer r.cleaning.Store(false)
			r.a.removeOrphans(ctx, orphans)
		}()
	}
	return nil
}

// fingerprint summarizes what a worker reacts to in its containers.
func fingerprint(cs []runtime.ContainerStatus) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s/%s/%d/%s", c.ID, c.Name, c.Attempt, c.State)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// removeOrphans stops and removes containers whose pod has no worker: its
// deletion completed while the agent was down, or an earlier removal
// failed.
func (a *Agent) removeOrphans(ctx context.Context, cs []runtime.ContainerStatus) {
	grace := orphanGrace
	if m := a.cfg.Pods.MaxGracePeriod; m > 0 && m < grace {
		grace = m
	}
	for _, c := range cs {
		if a.disp.has(types.UID(c.PodUID)) {
			continue
		}
		a.cfg.Logger.Info("removing orphaned container", "pod", c.PodNamespace+"/"+c.PodName, "uid", c.PodUID, "container", c.Name, "id", c.ID)
		if c.State != runtime.StateExited {
			sctx, cancel := context.WithTimeout(ctx, grace+a.cfg.Pods.RuntimeTimeout)
			err := a.cfg.Runtime.Stop(sctx, c.ID, grace)
			cancel()
			if err != nil && !errors.Is(err, runtime.ErrNotFound) {
				a.cfg.Logger.Warn("stop orphaned container", "id", c.ID, "err", err)
				continue
			}
		}
		rctx, cancel := context.WithTimeout(ctx, a.cfg.Pods.RuntimeTimeout)
		err := a.cfg.Runtime.Remove(rctx, c.ID)
		cancel()
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			a.cfg.Logger.Warn("remove orphaned container", "id", c.ID, "err", err)
		}
	}
}

// removeStalePodDirs drops the files of pods that have no worker.
func (a *Agent) removeStalePodDirs() {
	if a.cfg.RootDir == "" {
		return
	}
	keys, err := podfiles.ListPods(a.cfg.RootDir)
	if err != nil {
		a.cfg.Logger.Warn("list pod directories", "err", err)
		return
	}
	known := a.disp.uids()
	for _, k := range keys {
		if known[types.UID(k.UID)] {
			continue
		}
		if err := podfiles.RemovePod(a.cfg.RootDir, k); err != nil {
			a.cfg.Logger.Warn("remove stale pod directory", "pod", k.Namespace+"/"+k.Name, "err", err)
		}
	}
}
