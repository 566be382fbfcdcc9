// Package manager runs allot's controllers in one process: the garbage
// collector, namespace deletion, node lifecycle, taint eviction, the pod
// garbage collector and the ResourceClaim controller. `allot controller-manager` and `allot up` both use it.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/controller/controllerutil"
	"allot.dev/allot/internal/controller/devicetainteviction"
	"allot.dev/allot/internal/controller/gc"
	"allot.dev/allot/internal/controller/namespace"
	"allot.dev/allot/internal/controller/nodelifecycle"
	"allot.dev/allot/internal/controller/podgc"
	"allot.dev/allot/internal/controller/resourceclaim"
	"allot.dev/allot/internal/controller/taineviction"
	"allot.dev/allot/pkg/client"
)

// Config configures the controllers. Zero durations take each
// controller's default.
type Config struct {
	REST   *rest.Config
	Logger *slog.Logger
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// before it is marked NotReady; NodeMonitorPeriod how often nodes are
	// checked.
	NodeMonitorGracePeriod time.Duration
	NodeMonitorPeriod      time.Duration
	// The node lifecycle controller's taint rate limits
	// (nodelifecycle.Options); zero takes Kubernetes' defaults.
	NodeEvictionRate          float64
	SecondaryNodeEvictionRate float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
	// PodEvictionQPS and PodEvictionBurst pace the pod deletions of node
	// and device taint eviction together (taineviction.Limiter); QPS <= 0
	// is no limit.
	PodEvictionQPS   float64
	PodEvictionBurst int
	// GCWorkers, NamespaceWorkers and ClaimWorkers size the work queues'
	// worker pools (ClaimWorkers: the ResourceClaim controller's, default
	// resourceclaim.DefaultWorkers).
	GCWorkers        int
	NamespaceWorkers int
	ClaimWorkers     int
	// GCResync and GCRediscovery tune the garbage collector.
	GCResync      time.Duration
	GCRediscovery time.Duration
	// PodGC tunes the pod garbage collector (podgc.Options: the terminated
	// pods kept, negative for all; how often it runs; how long a node must
	// be missing before its pods are deleted).
	TerminatedPodGCThreshold int
	PodGCPeriod              time.Duration
	PodGCOrphanQuarantine    time.Duration
	// FenceMargin is what the ResourceClaim controller adds to a node's
	// recorded fence time before it releases the node's claims on devices
	// other nodes can reach (resourceclaim.Options.FenceMargin; zero: 5s).
	FenceMargin time.Duration
	// Registry receives the controllers' metrics: the work queues'
	// workqueue_* and the ResourceClaim controller's resource_controller_*.
	// The caller serves it; nil keeps them in a private registry. One
	// registry serves one Run.
	Registry *prometheus.Registry
}

// Run runs every controller until ctx ends or one fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.GCWorkers == 0 {
		cfg.GCWorkers = 4
	}
	if cfg.NamespaceWorkers == 0 {
		cfg.NamespaceWorkers = 2
	}
	if cfg.ClaimWorkers == 0 {
		cfg.ClaimWorkers = resourceclaim.DefaultWorkers
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	queues, err := controllerutil.NewQueueMetrics(cfg.Registry)
	if err != nil {
		return err
	}
	c, err := client.NewForConfig(cfg.REST)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	collector, err := gc.New(cfg.REST, gc.Options{ResyncInterval: cfg.GCResync, RediscoveryInterval: cfg.GCRediscovery,
		QueueMetrics: queues, Logger: cfg.Logger.With("controller", "garbage-collector")})
	if err != nil {
		return fmt.Errorf("create garbage collector: %w", err)
	}
	nsc, err := namespace.New(cfg.REST, namespace.Options{QueueMetrics: queues, Logger: cfg.Logger.With("controller", "namespace")})
	if err != nil {
		return fmt.Errorf("create namespace controller: %w", err)
	}
	factory := client.NewFactory(c, 0, client.WithoutManagedFields())
	nodes, err := nodelifecycle.New(c, factory, nodelifecycle.Options{
		GracePeriod: cfg.NodeMonitorGracePeriod, MonitorPeriod: cfg.NodeMonitorPeriod,
		EvictionRate: cfg.NodeEvictionRate, SecondaryEvictionRate: cfg.SecondaryNodeEvictionRate,
		UnhealthyZoneThreshold: cfg.UnhealthyZoneThreshold, LargeClusterSizeThreshold: cfg.LargeClusterSizeThreshold,
		Registry: cfg.Registry, Logger: cfg.Logger.With("controller", "node-lifecycle"),
	})
	if err != nil {
		return fmt.Errorf("create node lifecycle controller: %w", err)
	}
	limiter := taineviction.NewLimiter(cfg.PodEvictionQPS, cfg.PodEvictionBurst)
	evictions, err := taineviction.New(c, factory, taineviction.Options{
		Registry: cfg.Registry, QueueMetrics: queues, Logger: cfg.Logger.With("controller", "taint-eviction"), Limiter: limiter,
	})
	if err != nil {
		return fmt.Errorf("create taint eviction controller: %w", err)
	}
	deviceEvictions, err := devicetainteviction.New(c, factory, devicetainteviction.Options{
		Registry: cfg.Registry, QueueMetrics: queues, Logger: cfg.Logger.With("controller", "device-taint-eviction"), Limiter: limiter,
	})
	if err != nil {
		return fmt.Errorf("create device taint eviction controller: %w", err)
	}
	pgc, err := podgc.New(c, factory, podgc.Options{
		TerminatedThreshold: cfg.TerminatedPodGCThreshold, Period: cfg.PodGCPeriod, OrphanQuarantine: cfg.PodGCOrphanQuarantine,
		Registry: cfg.Registry, Logger: cfg.Logger.With("controller", "pod-garbage-collector"),
	})
	if err != nil {
		return fmt.Errorf("create pod garbage collector: %w", err)
	}
	claims, err := resourceclaim.New(c, factory, resourceclaim.Options{
		Registry: cfg.Registry, QueueMetrics: queues, Logger: cfg.Logger.With("controller", "resourceclaim"),
		FenceMargin: cfg.FenceMargin,
	})
	if err != nil {
		return fmt.Errorf("create resourceclaim controller: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 7)
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	run("garbage collector", func() error { return collector.Run(ctx, cfg.GCWorkers) })
	run("namespace controller", func() error { return nsc.Run(ctx, cfg.NamespaceWorkers) })
	run("node lifecycle controller", func() error { nodes.Run(ctx); return nil })
	run("pod garbage collector", func() error { pgc.Run(ctx); return nil })
	run("taint eviction controller", func() error { return evictions.Run(ctx, 2) })
	run("device taint eviction controller", func() error { return deviceEvictions.Run(ctx, 2) })
	run("resourceclaim controller", func() error { return claims.Run(ctx, cfg.ClaimWorkers) })
	wg.Wait()
	factory.Shutdown()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
