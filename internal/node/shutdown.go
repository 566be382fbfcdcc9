package node

import (
	"context"
	"sync"
	"time"

	"allot.dev/allot/internal/node/runtime"
)

// DefaultShutdownGracePeriod is how long a container stopped at shutdown
// (Config.StopContainersOnExit) has between SIGTERM and SIGKILL.
const DefaultShutdownGracePeriod = 5 * time.Second

// stopContainers stops what the agent ran, once its pod workers have ended
// (none restarts what is stopped here): every running container gets
// SIGTERM, then SIGKILL after the shutdown grace period, all at once; then
// the runtime releases each container's host resources (a runc rootfs
// mount) and keeps its record, so the next agent applies each pod's
// restart policy as after a reboot. Containers that never started are
// removed. Claims stay prepared. Failures are logged: shutdown goes on.
func (a *Agent) stopContainers() {
	grace := a.cfg.ShutdownGracePeriod
	ctx, cancel := context.WithTimeout(context.Background(), grace+a.podCfg.Timing.RuntimeTimeout)
	defer cancel()
	log := a.cfg.Logger
	cs, err := a.cfg.Runtime.List(ctx)
	if err != nil {
		log.Error("stop containers at shutdown: list", "err", err)
		return
	}
	rel, _ := a.cfg.Runtime.(runtime.Releaser)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stopped int
	)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.State == runtime.StateCreated {
				if err := a.cfg.Runtime.Remove(ctx, c.ID); err != nil {
					log.Warn("remove unstarted container at shutdown", "pod", c.PodNamespace+"/"+c.PodName, "container", c.Name, "err", err)
				}
				return
			}
			if c.State == runtime.StateRunning {
				if err := a.cfg.Runtime.Stop(ctx, c.ID, grace); err != nil {
					log.Warn("stop container at shutdown", "pod", c.PodNamespace+"/"+c.PodName, "container", c.Name, "err", err)
					return
				}
				mu.Lock()
				stopped++
				mu.Unlock()
			}
			if rel != nil {
				if err := rel.Release(ctx, c.ID); err != nil {
					log.Warn("release container at shutdown", "pod", c.PodNamespace+"/"+c.PodName, "container", c.Name, "err", err)
				}
			}
		}()
	}
	wg.Wait()
	if stopped > 0 {
		log.Info("stopped the node's containers", "containers", stopped)
	}
}
