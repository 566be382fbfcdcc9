package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"allot.dev/allot/internal/apiserver"
	"allot.dev/allot/internal/cluster"
	"allot.dev/allot/internal/scheduler"
)

func newUpCommand() *cobra.Command {
	var (
		o           cluster.Options
		demo        bool
		demoTimeout time.Duration
		keep        bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start an all-in-one cluster: etcd, API server and the other components",
		Long: `Start an all-in-one cluster in one process. State lives in --data-dir:
etcd's data (unless --etcd-servers points at an external cluster), the
tokens file, the certificates, and DIR/kubeconfig for clients.

Ctrl-C (SIGINT) or SIGTERM stops the cluster and the local node's
containers and unmounts their root filesystems; their claims stay
prepared, and the next start runs the pods again per their restart
policy. --keep-containers leaves them running for the next start to
adopt. After a kill -9, "allot down --data-dir DIR" cleans up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if demo {
				if err := configureDemo(&o, demoTimeout, cmd.OutOrStdout()); err != nil {
					return err
				}
			}
			o.Node.StopContainersOnExit = !keep
			if !cmd.Flags().Changed("pod-resources-socket") {
				// The kubelet's path, unless another cluster on this host
				// has it: then one in the data dir.
				dir, err := filepath.Abs(o.DataDir)
				if err != nil {
					return err
				}
				o.Node.PodResourcesFallbackSocket = filepath.Join(dir, "pod-resources", "kubelet.sock")
			}
			return cluster.Up(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&keep, "keep-containers", false, "leave the local node's containers running when allot up exits, for the next start to adopt (as a node agent restart does)")
	f.BoolVar(&demo, "demo", false, "also run the example device plugin and DRA drivers (gpu.example.com, fabric.example.com) in-process, with their sockets under DATA-DIR/demo, and the demo pod of examples/manifests/demo.yaml")
	f.DurationVar(&demoTimeout, "demo-timeout", 3*time.Minute, "how long the demo waits for its pod to finish")
	f.StringVar(&o.DataDir, "data-dir", defaultDataDir(), "directory for the cluster's state")
	f.StringVar(&o.Listen, "listen", "127.0.0.1:6443", "API server address (host:port; port 0 picks a free one)")
	f.StringSliceVar(&o.EtcdServers, "etcd-servers", nil, "use these etcd endpoints instead of an embedded etcd")
	f.DurationVar(&o.CompactionInterval, "etcd-compaction-interval", o.DefaultCompaction(), "how often old etcd revisions are compacted (0 disables)")
	addTolerationFlags(f, &o)
	addEtcdSpaceFlags(f, &o)
	f.StringSliceVar(&o.NodeNames, "node-name", nil, "names of the nodes to create tokens for (default: the host name)")
	f.StringSliceVar(&o.Disable, "disable", nil, "components not to run in this process: controller-manager, scheduler, node")
	f.StringVar(&o.NodeRuntime, "runtime", "runc", "container runtime of the local node: runc or fake")
	f.StringVar(&o.NodeRootDir, "node-root-dir", "", "root dir of the local node: logs, images, containers (default DATA-DIR/node)")
	f.StringSliceVar(&o.CDISpecDirs, "cdi-spec-dir", nil, "CDI spec directories of the local node (default /etc/cdi and /var/run/cdi)")
	addControllerFlags(f, &o.Controllers)
	addNodeTimerFlags(f, &o.Node)
	addShutdownFlags(f, &o.Node)
	addDevicePluginFlags(f, &o.Node)
	addDRAFlags(f, &o.Node)
	f.StringVar((*string)(&o.Scheduler.ScoreStrategy), "score-strategy", "LeastAllocated", "how the scheduler ranks feasible nodes: LeastAllocated (spread) or MostAllocated (pack)")
	f.IntVar(&o.Scheduler.PercentageOfNodesToScore, "percentage-of-nodes-to-score", 0, "the scheduler stops filtering once this share of the nodes (at least 100) is feasible; 0 adapts to the cluster's size, 100 looks at every node")
	f.DurationVar(&o.Scheduler.PodInitialBackoff, "pod-initial-backoff", scheduler.DefaultPodInitialBackoff, "scheduler backoff after a pod's first failed attempt; doubles per attempt")
	f.DurationVar(&o.Scheduler.PodMaxBackoff, "pod-max-backoff", scheduler.DefaultPodMaxBackoff, "longest scheduler backoff between a pod's attempts")
	f.DurationVar(&o.Scheduler.UnschedulableTimeout, "unschedulable-timeout", scheduler.DefaultUnschedulableTimeout, "retry an unschedulable pod after this long even if no cluster event moved it")
	return cmd
}

func newAPIServerCommand() *cobra.Command {
	var o cluster.Options
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the API server alone",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.APIServerOnly = true
			return cluster.Up(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", defaultDataDir(), "directory for tokens, certificates and (without --etcd-servers) etcd data")
	f.StringVar(&o.Listen, "listen", "127.0.0.1:6443", "address to listen on (host:port)")
	f.StringSliceVar(&o.EtcdServers, "etcd-servers", nil, "etcd endpoints; without them an embedded etcd runs in --data-dir")
	f.DurationVar(&o.CompactionInterval, "etcd-compaction-interval", o.DefaultCompaction(), "how often old etcd revisions are compacted (0 disables)")
	addTolerationFlags(f, &o)
	addEtcdSpaceFlags(f, &o)
	f.StringVar(&o.TokensFile, "tokens-file", "", "bearer tokens file (default DATA-DIR/tokens.csv)")
	return cmd
}

// addEtcdSpaceFlags adds the embedded etcd's disk reserve and quota
// (docs/operator-guide.md, "A full disk").
func addEtcdSpaceFlags(f *pflag.FlagSet, o *cluster.Options) {
	f.Var(byteSize{&o.EtcdDiskReserve}, "etcd-disk-reserve", "free space the embedded etcd keeps on its disk; below it writes are answered 507 Insufficient Storage and reads still served (a quantity like 128Mi; default 128Mi)")
	f.Var(byteSize{&o.EtcdQuotaBytes}, "etcd-quota-bytes", "the embedded etcd's database quota; beyond it etcd raises its NOSPACE alarm and writes are answered 507 (a quantity like 8Gi; default 2Gi)")
}

// byteSize is a flag taking a quantity (128Mi, 2G, 1048576).
type byteSize struct{ p *int64 }

func (b byteSize) String() string {
	if b.p == nil || *b.p == 0 {
		return ""
	}
	return resource.NewQuantity(*b.p, resource.BinarySI).String()
}

func (b byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a quantity such as 128Mi: %w", err)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return fmt.Errorf("%q: want a positive number of bytes", s)
	}
	*b.p = v
	return nil
}

func (byteSize) Type() string { return "quantity" }

// addTolerationFlags adds the API server's default node-loss tolerations.
func addTolerationFlags(f *pflag.FlagSet, o *cluster.Options) {
	f.Int64Var(&o.DefaultNotReadyTolerationSeconds, "default-not-ready-toleration-seconds", apiserver.DefaultTolerationSeconds,
		"tolerationSeconds of the node.kubernetes.io/not-ready NoExecute toleration added to pods without one (negative: none)")
	f.Int64Var(&o.DefaultUnreachableTolerationSeconds, "default-unreachable-toleration-seconds", apiserver.DefaultTolerationSeconds,
		"tolerationSeconds of the node.kubernetes.io/unreachable NoExecute toleration added to pods without one: how long pods stay bound to a lost node (negative: none)")
}
