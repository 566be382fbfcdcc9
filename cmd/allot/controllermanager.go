package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/controller/manager"
	"allot.dev/allot/internal/controller/nodelifecycle"
	"allot.dev/allot/internal/controller/podgc"
	"allot.dev/allot/internal/controller/resourceclaim"
	"allot.dev/allot/internal/controller/taineviction"

	"allot.dev/allot/internal/fence"
	"allot.dev/allot/internal/leaderelect"
)

func newControllerManagerCommand() *cobra.Command {
	var cfg manager.Config
	var kubeconfig, metricsAddr string
	var election leaderelect.Config
	var apiServers []string
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers: garbage collection, namespace deletion, node lifecycle, node and device taint eviction, pod garbage collection, resource claims",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := election.Validate(); err != nil {
				return err
			}
			rc, err := componentREST(kubeconfig, apiServers, cfg.Logger) // nil logger: slog's default, the manager's
			if err != nil {
				return err
			}
			cfg.REST = rc
			cfg.Registry = prometheus.NewRegistry()
			if metricsAddr != "" {
				stop, err := serveMetrics(cmd.Context(), metricsAddr, cfg.Registry)
				if err != nil {
					return err
				}
				defer stop()
			}
			return leaderelect.Run(cmd.Context(), rc, election, cfg.Logger, cfg.Registry, func(ctx context.Context) error {
				return manager.Run(ctx, cfg)
			})
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with a controller-manager token (default $KUBECONFIG, then the last allot up's)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-listen", "", "serve Prometheus metrics on this address (host:port) at /metrics; empty disables")
	addControllerFlags(cmd.Flags(), &cfg)
	leaderelect.AddFlags(cmd.Flags(), &election, auth.ControllerManagerLeaseName)
	addAPIServersFlag(cmd.Flags(), &apiServers)
	return cmd
}

// addControllerFlags adds the controller manager's timers and sizes.
func addControllerFlags(f *pflag.FlagSet, cfg *manager.Config) {
	f.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", 0, "how long a node may go without a heartbeat before it is NotReady (default 40s)")
	f.DurationVar(&cfg.NodeMonitorPeriod, "node-monitor-period", 0, "how often node heartbeats are checked (default 5s)")
	f.DurationVar(&cfg.GCResync, "gc-resync", 0, "how often the garbage collector re-examines every object (default 10m)")
	f.DurationVar(&cfg.GCRediscovery, "gc-rediscovery", 0, "how often the garbage collector re-discovers resources (default 30s)")
	f.IntVar(&cfg.GCWorkers, "gc-workers", 0, "garbage collector workers (default 4)")
	f.Float64Var(&cfg.NodeEvictionRate, "node-eviction-rate", nodelifecycle.DefaultEvictionRate,
		"nodes per second per zone newly tainted unreachable or not-ready (their pods are evicted once their tolerations run out)")
	f.Float64Var(&cfg.SecondaryNodeEvictionRate, "secondary-node-eviction-rate", nodelifecycle.DefaultSecondaryEvictionRate,
		"the same once --unhealthy-zone-threshold of a zone's nodes are unhealthy (zones of at most --large-cluster-size-threshold nodes then stop)")
	f.Float64Var(&cfg.UnhealthyZoneThreshold, "unhealthy-zone-threshold", nodelifecycle.DefaultUnhealthyZoneThreshold,
		"share of a zone's nodes (and more than two) unhealthy at which tainting slows to --secondary-node-eviction-rate")
	f.IntVar(&cfg.LargeClusterSizeThreshold, "large-cluster-size-threshold", nodelifecycle.DefaultLargeClusterSizeThreshold,
		"zones of at most this many nodes stop tainting when partially disrupted")
	f.Float64Var(&cfg.PodEvictionQPS, "pod-eviction-qps", taineviction.DefaultEvictionQPS,
		"pods per second that node and device NoExecute taint eviction delete together, at most; 0 or less: no limit")
	f.IntVar(&cfg.PodEvictionBurst, "pod-eviction-burst", taineviction.DefaultEvictionBurst,
		"pods that taint eviction may delete at once before --pod-eviction-qps paces it")
	f.IntVar(&cfg.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", podgc.DefaultTerminatedThreshold,
		"terminated pods (Succeeded or Failed) kept before the oldest are deleted; negative keeps all")
	f.DurationVar(&cfg.PodGCPeriod, "pod-gc-period", podgc.DefaultPeriod, "how often the pod garbage collector runs")
	f.DurationVar(&cfg.PodGCOrphanQuarantine, "pod-gc-orphan-quarantine", podgc.DefaultOrphanQuarantine,
		"how long a node must be gone before the pods bound to it are deleted")
	f.DurationVar(&cfg.FenceMargin, "fence-margin", fence.DefaultMargin,
		"added to a node's recorded fence time (allot node --self-fence-after) before the claims of its evicted pods that hold devices other nodes can reach are released")
	f.IntVar(&cfg.ClaimWorkers, "concurrent-resource-claim-syncs", 0,
		fmt.Sprintf("pods and claims the ResourceClaim controller syncs at once (default %d)", resourceclaim.DefaultWorkers))
}
