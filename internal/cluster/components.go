package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/controller/manager"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/internal/node/runtime/runc"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/pkg/client"
)

// components are the control-plane parts `allot up` runs beside the API
// server, each with its own role's token, as if it were a separate process.
type components struct {
	wg sync.WaitGroup
}

func (c *components) wait() { c.wg.Wait() }

func (c *components) run(ctx context.Context, o Options, name string, f func(context.Context) error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			o.Logger.Error("component failed", "component", name, "err", err)
		}
	}()
}

// startComponents writes a kubeconfig per component under
// DATA-DIR/components and starts the enabled ones.
func startComponents(ctx context.Context, o Options, url string, tokens map[string]string, caPEM []byte) (*components, error) {
	c := &components{}
	if o.enabled("controller-manager") {
		cfg := o.Controllers
		cfg.Logger = o.Logger.With("component", "controller-manager")
		rc, err := componentConfig(o.DataDir, url, auth.ControllerManagerName, tokens, caPEM, cfg.Logger)
		if err != nil {
			return nil, err
		}
		cfg.REST = rc
		c.run(ctx, o, "controller-manager", func(ctx context.Context) error { return manager.Run(ctx, cfg) })
	}
	if o.enabled("scheduler") {
		cfg := o.Scheduler
		cfg.Logger = o.Logger.With("component", "scheduler")
		rc, err := componentConfig(o.DataDir, url, auth.SchedulerName, tokens, caPEM, cfg.Logger)
		if err != nil {
			return nil, err
		}
		if cfg.Client, err = client.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("create scheduler client: %w", err)
		}
		s, err := scheduler.New(cfg)
		if err != nil {
			return nil, err
		}
		if err := s.RegisterStateMetrics(); err != nil {
			return nil, err
		}
		c.run(ctx, o, "scheduler", s.Run)
	}
	if o.enabled("node") {
		if err := startLocalNode(ctx, c, o, url, tokens, caPEM); err != nil {
			return nil, err
		}
	}
	for _, e := range o.Extras {
		identity := auth.AdminName
		if e.Driver != "" {
			identity = e.Driver
		}
		rc, err := componentConfig(o.DataDir, url, identity, tokens, caPEM, o.Logger.With("component", e.Name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		c.run(ctx, o, e.Name, func(ctx context.Context) error { return e.Run(ctx, rc) })
	}
	return c, nil
}

// startLocalNode runs the node agent of this machine, named after the first
// --node-name, with its node token.
func startLocalNode(ctx context.Context, c *components, o Options, url string, tokens map[string]string, caPEM []byte) error {
	cfg := o.Node
	cfg.NodeName = o.NodeNames[0]
	cfg.Logger = o.Logger.With("component", "node", "node", cfg.NodeName)
	rc, err := componentConfig(o.DataDir, url, cfg.NodeName, tokens, caPEM, cfg.Logger)
	if err != nil {
		return err
	}
	if cfg.Client, err = client.NewForConfig(rc); err != nil {
		return fmt.Errorf("create node client: %w", err)
	}
	cfg.RootDir = o.NodeRootDir
	if cfg.RootDir == "" {
		cfg.RootDir = filepath.Join(o.DataDir, "node")
	}
	if cfg.Runtime, err = newRuntime(o.NodeRuntime, cfg.RootDir, o.CDISpecDirs, cfg.Logger); err != nil {
		return err
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = "127.0.0.1"
	}
	if cfg.LogListen == "" {
		cfg.LogListen = "127.0.0.1:0"
	}
	// The admin's token for /metrics and logs read from the agent directly;
	// the API server authenticates with its client certificate.
	cfg.LogTokens = append(cfg.LogTokens, tokens[auth.AdminName])
	c.run(ctx, o, "node", func(ctx context.Context) error { return node.Run(ctx, cfg) })
	return nil
}

// newRuntime creates the local node's container runtime.
func newRuntime(name, rootDir string, cdiDirs []string, log *slog.Logger) (runtime.Runtime, error) {
	switch name {
	case "", "runc":
		rt, err := runc.New(runc.Options{RootDir: rootDir, CDISpecDirs: cdiDirs, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("start the runc runtime (use --runtime fake to simulate containers): %w", err)
		}
		return rt, nil
	case "fake":
		return fake.New(fake.Options{StateDir: filepath.Join(rootDir, "fake")})
	}
	return nil, fmt.Errorf("unknown runtime %q: want runc or fake", name)
}

// componentConfig writes DATA-DIR/components/NAME.kubeconfig with NAME's
// token and returns its REST config, whose clients log to logger, once
// per change, when the API server refuses writes for want of storage.
func componentConfig(dataDir, url, name string, tokens map[string]string, caPEM []byte, logger *slog.Logger) (*rest.Config, error) {
	tok, ok := tokens[name]
	if !ok {
		return nil, fmt.Errorf("no token for %s in the tokens file", name)
	}
	path := filepath.Join(dataDir, "components", name+".kubeconfig")
	if err := WriteKubeconfig(path, url, tok, caPEM); err != nil {
		return nil, err
	}
	rc, err := client.LoadRESTConfig(path)
	if err != nil {
		return nil, fmt.Errorf("load %s kubeconfig: %w", name, err)
	}
	client.LogWriteOutages(rc, logger)
	return rc, nil
}
