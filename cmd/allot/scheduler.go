package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/leaderelect"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/pkg/client"
)

func newSchedulerCommand() *cobra.Command {
	var (
		kubeconfig  string
		metricsAddr string
		cfg         scheduler.Config
		election    leaderelect.Config
		apiServers  []string
	)
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler: place pending pods on nodes",
		Long: `Run the scheduler against an API server. It schedules the pods whose
spec.schedulerName is --scheduler-name and that have no node yet: it filters
the nodes with its plugins, scores the feasible ones, and binds each pod
through the pods/binding subresource. Pods that fit nowhere get
PodScheduled=False with the reasons, and are retried when the cluster
changes in a way that may let them fit. ` + "`allot explain pod NAME`" + ` shows the
per-node reasons.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			if err := election.Validate(); err != nil {
				return err
			}
			rc, err := componentREST(kubeconfig, apiServers, cfg.Logger)
			if err != nil {
				return err
			}
			c, err := client.NewForConfig(rc)
			if err != nil {
				return err
			}
			cfg.Client = c
			cfg.Metrics = scheduler.NewMetrics()
			s, err := scheduler.New(cfg)
			if err != nil {
				return err
			}
			if err := s.RegisterStateMetrics(); err != nil {
				return err
			}
			if metricsAddr != "" {
				stop, err := serveMetrics(cmd.Context(), metricsAddr, cfg.Metrics.Registry)
				if err != nil {
					return err
				}
				defer stop()
			}
			return leaderelect.Run(cmd.Context(), rc, election, cfg.Logger, cfg.Metrics.Registry, s.Run)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", client.DefaultKubeconfigPath(), "kubeconfig file ($KUBECONFIG, else the one the last 'allot up' wrote)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-listen", "", "serve Prometheus metrics on this address (host:port) at /metrics; empty disables")
	addSchedulerFlags(cmd, &cfg)
	leaderelect.AddFlags(cmd.Flags(), &election, auth.SchedulerLeaseName)
	addAPIServersFlag(cmd.Flags(), &apiServers)
	return cmd
}

// addSchedulerFlags adds a flag for every scheduler setting that is not a
// connection; `allot up` can share it.
func addSchedulerFlags(cmd *cobra.Command, cfg *scheduler.Config) {
	f := cmd.Flags()
	f.StringVar(&cfg.SchedulerName, "scheduler-name", scheduler.DefaultSchedulerName, "schedule only pods whose spec.schedulerName is this")
	f.StringVar((*string)(&cfg.ScoreStrategy), "score-strategy", "LeastAllocated", "how feasible nodes are ranked: LeastAllocated (spread) or MostAllocated (pack)")
	f.DurationVar(&cfg.PodInitialBackoff, "pod-initial-backoff", scheduler.DefaultPodInitialBackoff, "backoff after a pod's first failed attempt; doubles per attempt")
	f.DurationVar(&cfg.PodMaxBackoff, "pod-max-backoff", scheduler.DefaultPodMaxBackoff, "longest backoff between a pod's attempts")
	f.DurationVar(&cfg.UnschedulableTimeout, "unschedulable-timeout", scheduler.DefaultUnschedulableTimeout, "safety net: retry an unschedulable pod after this long even if no cluster event moved it")
	f.DurationVar(&cfg.BindTimeout, "bind-timeout", scheduler.DefaultBindTimeout, "deadline of one pod's binding")
	f.DurationVar(&cfg.BindingConditionsTimeout, "binding-conditions-timeout", scheduler.DefaultBindingConditionsTimeout, "how long a pod whose devices have binding conditions waits, its claims allocated, for the conditions to be True before the allocation is released and the pod retried (Kubernetes' DynamicResources bindingTimeout)")
	f.DurationVar(&cfg.APITimeout, "api-timeout", scheduler.DefaultAPITimeout, "deadline of the scheduler's other API calls (status patches)")
	f.DurationVar(&cfg.CycleTimeout, "cycle-timeout", scheduler.DefaultCycleTimeout, "deadline of one scheduling cycle's plugin calls")
	f.IntVar(&cfg.Parallelism, "parallelism", 0, "goroutines that filter and score nodes in one cycle (0: one per 1000 nodes, at most GOMAXPROCS)")
	f.IntVar(&cfg.PercentageOfNodesToScore, "percentage-of-nodes-to-score", 0, "stop filtering once this share of the nodes (at least 100) is feasible and pick among those; 0 adapts to the cluster's size as kube-scheduler does, 100 looks at every node")
}

// serveMetrics serves g at /metrics on addr until stop is called (the
// scheduler's and the controller manager's --metrics-listen).
func serveMetrics(ctx context.Context, addr string, g prometheus.Gatherer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "error: serve metrics:", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
