package fabricdriver

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/cache"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/driver/controller"
)

// ControllerConfig configures RunController.
type ControllerConfig struct {
	// PoolsFile is the YAML file with the pools; "" means the built-in
	// default-pools.yaml. Read once at start.
	PoolsFile string
	// Controller configures the SDK. Client is required (a token of role
	// `driver fabric.example.com`); DriverName and ControllerName default
	// to DriverName and must not be anything else. Factory must be nil:
	// RunController builds one to share with its bookkeeping. With
	// Namespace set, only claims of that namespace count as taken units
	// (for tests that share a cluster).
	Controller controller.Config
	// Verbose logs debug messages; used when Controller.Logger is nil.
	Verbose bool
}

// AddFlags binds c's fields, except the client, to flags.
func (c *ControllerConfig) AddFlags(fs *pflag.FlagSet) {
	cc := &c.Controller
	fs.StringVar(&c.PoolsFile, "config", "", "YAML `file` with the pools (default: the built-in pools)")
	fs.IntVar(&cc.Workers, "workers", controller.DefaultWorkers, "claims and scheduling contexts handled at once")
	fs.DurationVar(&cc.Resync, "resync", controller.DefaultResync, "how often every claim and scheduling context is handled again")
	fs.DurationVar(&cc.MinRetryDelay, "min-retry-delay", controller.DefaultMinRetryDelay, "first delay before a failed claim or scheduling context is handled again")
	fs.DurationVar(&cc.MaxRetryDelay, "max-retry-delay", controller.DefaultMaxRetryDelay, "longest delay between retries")
	fs.DurationVar(&cc.APITimeout, "api-timeout", controller.DefaultAPITimeout, "deadline of each API call")
	fs.DurationVar(&cc.DriverTimeout, "driver-timeout", controller.DefaultDriverTimeout, "deadline of each allocation, deallocation and unsuitable-nodes check")
	fs.DurationVar(&cc.EventFlushTimeout, "event-flush-timeout", controller.DefaultEventFlushTimeout, "how long queued events are written on shutdown")
	fs.BoolVarP(&c.Verbose, "verbose", "v", false, "log debug messages")
}

// RunController allocates claims of fabric.example.com's classes until
// ctx ends, then returns nil; it returns an error when it cannot start.
func RunController(ctx context.Context, cfg ControllerConfig) error {
	ctl, err := newController(cfg, nil)
	if err != nil {
		return err
	}
	return ctl.Run(ctx)
}

// newController builds the allocator and the SDK controller around it;
// wrap, when set, stands between the two (tests use it to kill the
// controller in the middle of an allocation).
func newController(cfg ControllerConfig, wrap func(controller.Driver) controller.Driver) (*controller.Controller, error) {
	cc := cfg.Controller
	switch {
	case cc.Client == nil:
		return nil, fmt.Errorf("%s controller: client: required", DriverName)
	case cc.DriverName != "" && cc.DriverName != DriverName:
		return nil, fmt.Errorf("%s controller: driverName %q: must be %s or empty", DriverName, cc.DriverName, DriverName)
	case cc.ControllerName != "" && cc.ControllerName != DriverName:
		return nil, fmt.Errorf("%s controller: controllerName %q: must be %s or empty", DriverName, cc.ControllerName, DriverName)
	case cc.Factory != nil:
		return nil, fmt.Errorf("%s controller: factory: must be nil", DriverName)
	}
	pools, err := LoadPools(cfg.PoolsFile)
	if err != nil {
		return nil, err
	}
	if cc.Logger == nil {
		level := slog.LevelInfo
		if cfg.Verbose {
			level = slog.LevelDebug
		}
		cc.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	var opts []client.FactoryOption
	if cc.Namespace != "" {
		opts = append(opts, client.WithNamespace(cc.Namespace))
	}
	f := client.NewFactory(cc.Client, cc.Resync, opts...)
	cc.DriverName, cc.ControllerName, cc.Namespace, cc.Factory = DriverName, DriverName, "", f
	claims := f.ResourceClaims()
	l := newLedger(claims.Lister(), cc.Logger)
	// A claim that is gone keeps nothing (the SDK's finalizer normally
	// makes Deallocate come first).
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if c, ok := obj.(*resourcev1alpha2.ResourceClaim); ok {
			l.forget(c.UID)
		}
	}}); err != nil {
		return nil, fmt.Errorf("%s controller: watch claims: %w", DriverName, err)
	}
	var d controller.Driver = &allocator{pools: pools, nodes: f.Nodes().Lister(), dyn: cc.Client.Dynamic(), ledger: l}
	if wrap != nil {
		d = wrap(d)
	}
	cc.Logger.Info("pools", "count", len(pools.Pools), "file", cfg.PoolsFile)
	return controller.New(cc, d)
}
