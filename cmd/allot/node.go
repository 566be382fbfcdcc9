package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "allot.dev/allot/api/core/v1"
	drav1alpha1 "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/dra"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/internal/node/runtime/runc"
	"allot.dev/allot/pkg/client"
)

// defaultLogPort is the log server's port when --listen is not given, the
// kubelet's.
const defaultLogPort = "10250"

// nodeOptions are the flags of `allot node` that are not Config fields.
type nodeOptions struct {
	apiServers   []string
	kubeconfig   string
	runtime      string
	labels       map[string]string
	capacity     map[string]string
	logTokenFile string
	runcPath     string
	cdiSpecDirs  []string
	verbose      bool
}

func newNodeCommand() *cobra.Command {
	var (
		o   nodeOptions
		cfg node.Config
	)
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a node agent: register a Node and run the pods bound to it",
		Long: `Run the node agent of one machine. It registers the Node --name (capacity,
labels, addresses, the log server's port), renews its heartbeat Lease
kube-node-lease/NAME every --heartbeat-interval (the Node's status is written
when it changes, or every --node-status-report-frequency), and runs the pods whose spec.nodeName is --name with the
container runtime --runtime: init containers in order, then containers, with
restart policies and back-off, graceful deletion, and status written back.
Container logs are kept under --root-dir and served on --listen for the API
server's pods/log. Containers keep running when the agent stops; a restarted
agent adopts them (--stop-containers-on-exit stops them instead).

The kubeconfig should carry the node's token (allot up --node-name NAME
creates one in DATA-DIR/tokens.csv); an admin kubeconfig works too.`,
		Example: `  allot node --name gpu-1 --kubeconfig node.kubeconfig --root-dir /var/lib/allot
  allot node --name dev --runtime fake --root-dir /tmp/allot-node --listen 127.0.0.1:0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.complete(&cfg, cmd); err != nil {
				return err
			}
			return node.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.NodeName, "name", defaultNodeName(), "the Node's name")
	f.StringVar(&o.kubeconfig, "kubeconfig", client.DefaultKubeconfigPath(), "kubeconfig file ($KUBECONFIG, else the one of the last allot up)")
	addAPIServersFlag(f, &o.apiServers)
	f.StringVar(&cfg.RootDir, "root-dir", defaultImageRootDir, "directory for container logs, pod checkpoints, images and runtime state")
	f.StringVar(&o.runtime, "runtime", "runc", "container runtime: runc or fake (simulated containers)")
	f.StringVar(&o.runcPath, "runc", "runc", "the runc binary (runc runtime)")
	f.StringSliceVar(&o.cdiSpecDirs, "cdi-spec-dir", nil, "CDI spec directories (default /etc/cdi and /var/run/cdi; runc runtime)")
	f.StringVar(&cfg.NodeIP, "node-ip", "", "the InternalIP address (default: the address that routes to the API server)")
	f.StringVar(&cfg.LogListen, "listen", "", "log and metrics server address host:port, over TLS with a certificate the cluster CA issues through the API server: /containerLogs and /metrics, for the API server or a token (port 0 picks one; default NODE-IP:"+defaultLogPort+")")
	f.StringVar(&o.logTokenFile, "log-token-file", "", "file of bearer tokens (one per line) the log server accepts besides the kubeconfig's own, for operators reading it directly (the API server uses its client certificate)")
	f.BoolVar(&cfg.LogAllowAnonymous, "log-allow-anonymous", false, "serve logs without a token (only for a log server on loopback)")
	f.StringToStringVar(&o.labels, "node-labels", nil, "labels of the Node, k=v,...")
	f.StringToStringVar(&o.capacity, "capacity", nil, "capacity overrides and additions, resource=quantity,... (for example cpu=8,memory=32Gi)")
	f.IntVar(&cfg.MaxPods, "max-pods", node.DefaultMaxPods, "the Node's pods capacity")
	addDevicePluginFlags(f, &cfg)
	addDRAFlags(f, &cfg)
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log debug messages")
	addNodeTimerFlags(f, &cfg)
	f.BoolVar(&cfg.StopContainersOnExit, "stop-containers-on-exit", false,
		"stop the node's containers and unmount their rootfs when the agent exits (default: leave them running for the next agent to adopt)")
	addShutdownFlags(f, &cfg)
	return cmd
}

// addNodeTimerFlags adds a flag for every timer of the agent; `allot up`
// and `allot sim-nodes` share them.
func addNodeTimerFlags(f *pflag.FlagSet, cfg *node.Config) {
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", node.DefaultHeartbeatInterval, "how often the node's heartbeat Lease (kube-node-lease/NAME) is renewed")
	f.DurationVar(&cfg.NodeLeaseDuration, "node-lease-duration", node.DefaultNodeLeaseDuration, "the heartbeat Lease's leaseDurationSeconds (whole seconds)")
	f.DurationVar(&cfg.NodeStatusReportFrequency, "node-status-report-frequency", node.DefaultNodeStatusReportFrequency,
		"how often the Node's status is written when nothing in it changed (a change is written at the next heartbeat)")
	f.DurationVar(&cfg.SelfFenceAfter, "self-fence-after", fence.DefaultSelfFenceAfter,
		"when no heartbeat has reached the API server for this long, stop the pods holding devices other nodes can reach (and pods annotated "+
			fence.AnnotationPodFence+"=true) and unprepare their claims; recorded on the Node as "+fence.AnnotationSelfFenceAfter+"; 0 disables")
	f.DurationVar(&cfg.RelistInterval, "relist-interval", node.DefaultRelistInterval, "how often the runtime's containers are listed to notice exits")
	f.DurationVar(&cfg.APITimeout, "api-timeout", node.DefaultAPITimeout, "deadline of every API call")
	f.DurationVar(&cfg.Pods.Resync, "resync-interval", 0, "periodic sync of a pod without news (default 10s)")
	f.DurationVar(&cfg.Pods.RestartBackoffInitial, "restart-backoff-initial", 0, "first delay before restarting an exited container; doubles per restart (default 10s)")
	f.DurationVar(&cfg.Pods.RestartBackoffMax, "restart-backoff-max", 0, "longest restart delay (default 5m)")
	f.DurationVar(&cfg.Pods.MaxGracePeriod, "max-grace-period", 0, "cap on termination grace periods (0: none)")
	f.DurationVar(&cfg.Pods.TerminatedCleanup, "terminated-pod-cleanup", 0, "how long a finished pod's containers are kept before removal (default 1m)")
	f.DurationVar(&cfg.Pods.AdmitRetry, "admit-retry-interval", 0, "how often a pod held by admission is offered again (default 5s)")
	f.DurationVar(&cfg.Pods.Retry, "retry-interval", 0, "delay after a failed API or runtime call (default 1s)")
	f.DurationVar(&cfg.Pods.RuntimeTimeout, "runtime-timeout", 0, "deadline of runtime calls other than stop (default 2m)")
}

// addShutdownFlags adds the flags of what the agent does with its
// containers when it exits.
func addShutdownFlags(f *pflag.FlagSet, cfg *node.Config) {
	f.DurationVar(&cfg.ShutdownGracePeriod, "shutdown-grace-period", node.DefaultShutdownGracePeriod,
		"when containers are stopped at exit: time between SIGTERM and SIGKILL")
}

// complete fills cfg from the flags: client, runtime, labels, capacity,
// log server address and tokens.
func (o *nodeOptions) complete(cfg *node.Config, cmd *cobra.Command) error {
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	rc, err := componentREST(o.kubeconfig, o.apiServers, cfg.Logger)
	if err != nil {
		return err
	}
	c, err := client.NewForConfig(rc)
	if err != nil {
		return err
	}
	cfg.Client = c
	if cfg.Capacity, err = parseCapacity(o.capacity); err != nil {
		return err
	}
	cfg.Labels = o.labels
	if cfg.Runtime, err = o.newRuntime(cfg); err != nil {
		return err
	}
	if cfg.LogListen == "" {
		ip := cfg.NodeIP
		if ip == "" {
			if ip, err = node.DetectNodeIP(c.RESTConfig().Host); err != nil {
				return err
			}
		}
		cfg.LogListen = net.JoinHostPort(ip, defaultLogPort)
	}
	if o.logTokenFile != "" {
		if cfg.LogTokens, err = readTokens(o.logTokenFile); err != nil {
			return err
		}
	}
	return nil
}

func (o *nodeOptions) newRuntime(cfg *node.Config) (runtime.Runtime, error) {
	switch o.runtime {
	case "runc":
		return runc.New(runc.Options{RootDir: cfg.RootDir, RuncPath: o.runcPath, CDISpecDirs: o.cdiSpecDirs, Logger: cfg.Logger})
	case "fake":
		return fake.New(fake.Options{StateDir: filepath.Join(cfg.RootDir, "fake")})
	}
	return nil, fmt.Errorf("unknown runtime %q: want runc or fake", o.runtime)
}

// parseCapacity parses resource=quantity pairs.
func parseCapacity(in map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for k, v := range in {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("capacity %s=%s: %w", k, v, err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// readTokens reads one token per line; blank lines and # comments are
// skipped.
func readTokens(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read log tokens: %w", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// defaultNodeName is the host name in the form node names take.
func defaultNodeName() string {
	h, err := os.Hostname()
	if err != nil {
		return "node"
	}
	return corev1.NodeNameFromHost(h)
}

// addDevicePluginFlags adds the device manager's flags, and the unhealthy
// device policy of both managers; `allot up` shares them for its local
// node.
func addDevicePluginFlags(f *pflag.FlagSet, cfg *node.Config) {
	f.StringVar((*string)(&cfg.UnhealthyDevicePolicy), "unhealthy-device-policy", string(node.UnhealthyDeviceFailPod),
		"what a device reported unhealthy (by a device plugin, or a DRA driver's instance) does to the pods holding it: "+
			"FailPod fails them (seed 001), Report only shows it in containerStatuses[].allocatedResourcesStatus")
	f.StringVar(&cfg.DevicePluginDir, "device-plugin-dir", "/var/lib/kubelet/device-plugins",
		"where device plugins register (kubelet.sock) and serve their sockets; empty disables the device manager")
	f.DurationVar(&cfg.DevicePluginGracePeriod, "device-plugin-grace-period", 0,
		"how long a resource whose plugin went away stays in capacity (default 5m, as the kubelet)")
	f.StringVar(&cfg.PodResourcesSocket, "pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock",
		"unix socket serving the kubelet's PodResources API (v1) for monitoring agents; empty disables it")
}

// addDRAFlags adds the DRA manager's flags; `allot up` shares them for its
// local node.
func addDRAFlags(f *pflag.FlagSet, cfg *node.Config) {
	f.StringVar(&cfg.PluginsRegistryDir, "plugins-registry-dir", drav1alpha1.DefaultPluginsRegistryDir,
		"where DRA drivers' kubelet plugins create their registration sockets; empty disables the DRA manager")
	f.DurationVar(&cfg.DRASliceGracePeriod, "dra-slice-grace-period", dra.DefaultSliceGracePeriod,
		"how long the NodeResourceSlice of a DRA driver that went away is kept for its return")
	f.DurationVar(&cfg.DRAPrepareTimeout, "dra-prepare-timeout", dra.DefaultPrepareTimeout,
		"deadline of each call that prepares or unprepares resource claims")
	f.DurationVar(&cfg.DRAPrepareBackoffInitial, "dra-prepare-backoff-initial", dra.DefaultBackoffInitial,
		"first delay after a failed prepare or unprepare; doubles per failure")
	f.DurationVar(&cfg.DRAPrepareBackoffMax, "dra-prepare-backoff-max", dra.DefaultBackoffMax,
		"longest delay between prepare or unprepare attempts")
}
