package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/pkg/client"
)

// simNodesOptions are the flags of `allot sim-nodes`.
type simNodesOptions struct {
	kubeconfig    string
	tokenFile     string
	count         int
	prefix        string
	labels        map[string]string
	capacity      map[string]string
	maxPods       int
	statusUpdates bool
	events        bool
	verbose       bool
}

func newSimNodesCommand() *cobra.Command {
	var (
		o    simNodesOptions
		base node.Config
	)
	cmd := &cobra.Command{
		Use:   "sim-nodes",
		Short: "Run many simulated nodes (fake runtime) in one process, for scale tests",
		Long: `Run --count node agents named PREFIX-0 ... PREFIX-(N-1) in one process. Each
registers its own Node, heartbeats and runs the pods bound to it with the
fake runtime (no processes: containers run until the annotations
allot.dev/fake-exit-after / allot.dev/fake-exit-code end them, or until
deleted). One pod watch serves all of them. Simulated nodes serve no logs
and keep no files.

With an admin kubeconfig the process acts as every node. With --token-file
(the tokens file format: token,name,role) each node uses the node token
whose name is its own, and the kubeconfig's identity only reads pods.

--status-updates=false skips pod status writes, for scheduler benchmarks
that must not count node agent writes.`,
		Example: `  allot sim-nodes --count 500 --prefix sim --capacity cpu=64,memory=256Gi
  allot sim-nodes --count 50 --token-file DATA-DIR/tokens.csv --status-updates=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fleet, err := o.fleet(base, cmd)
			if err != nil {
				return err
			}
			return fleet.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", client.DefaultKubeconfigPath(), "kubeconfig file ($KUBECONFIG, else the one of the last allot up)")
	f.StringVar(&o.tokenFile, "token-file", "", "tokens file (token,name,role) with a node token per simulated node; default: act as every node with the kubeconfig's identity")
	f.IntVar(&o.count, "count", 10, "number of simulated nodes")
	f.StringVar(&o.prefix, "prefix", "sim", "node name prefix; nodes are PREFIX-0, PREFIX-1, ...")
	f.StringToStringVar(&o.labels, "node-labels", nil, "labels of every simulated Node, k=v,...")
	f.StringToStringVar(&o.capacity, "capacity", map[string]string{"cpu": "32", "memory": "128Gi"}, "capacity of every simulated Node, resource=quantity,...")
	f.IntVar(&o.maxPods, "max-pods", node.DefaultMaxPods, "pods capacity of every simulated Node")
	f.BoolVar(&o.statusUpdates, "status-updates", true, "write pod statuses (false: skip them, as for kube-scheduler's benchmarks)")
	f.BoolVar(&o.events, "events", false, "record events for pods (costs one write per container start)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log debug messages")
	addNodeTimerFlags(f, &base)
	return cmd
}

// fleet builds the simulated nodes' configs and the fleet.
func (o *simNodesOptions) fleet(base node.Config, cmd *cobra.Command) (*node.Fleet, error) {
	if o.count < 1 {
		return nil, errors.New("--count must be at least 1")
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	rc, err := client.LoadRESTConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	shared, err := client.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	var tokens map[string]string
	if o.tokenFile != "" {
		if tokens, err = readNodeTokens(o.tokenFile); err != nil {
			return nil, err
		}
	}
	capacity, err := parseCapacity(o.capacity)
	if err != nil {
		return nil, err
	}
	base.Labels, base.Capacity, base.MaxPods = o.labels, capacity, o.maxPods
	base.DisableStatusUpdates, base.DisableEvents = !o.statusUpdates, !o.events
	base.Metrics = metrics.New(nil)
	base.Logger = logger
	cfgs := make([]node.Config, o.count)
	for i := range cfgs {
		cfg := base
		cfg.NodeName = fmt.Sprintf("%s-%d", o.prefix, i)
		cfg.Hostname = cfg.NodeName
		if cfg.Client, err = nodeClient(shared, rc, tokens, cfg.NodeName); err != nil {
			return nil, err
		}
		if cfg.Runtime, err = fake.New(fake.Options{}); err != nil {
			return nil, err
		}
		cfgs[i] = cfg
	}
	logger.Info("starting simulated nodes", "count", o.count, "prefix", o.prefix, "statusUpdates", o.statusUpdates)
	return node.NewFleet(shared, cfgs)
}

// nodeClient is the shared client, or one with the node's own token.
func nodeClient(shared *client.Client, rc *rest.Config, tokens map[string]string, name string) (*client.Client, error) {
	if tokens == nil {
		return shared, nil
	}
	tok, ok := tokens[name]
	if !ok {
		return nil, fmt.Errorf("no node token for %s in the token file", name)
	}
	nc := rest.AnonymousClientConfig(rc) // keeps TLS trust, drops credentials
	nc.BearerToken = tok
	nc.QPS, nc.Burst = rc.QPS, rc.Burst
	return client.NewForConfig(nc)
}

// readNodeTokens reads the node tokens of a tokens file (token,name,role).
func readNodeTokens(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("token file line %d: want token,name,role", n)
		}
		if strings.TrimSpace(f[2]) == "node" {
			out[strings.TrimSpace(f[1])] = strings.TrimSpace(f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	return out, nil
}
