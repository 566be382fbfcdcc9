package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/pkg/client"
)

// Defaults of Config's fields.
const (
	DefaultSchedulerName        = "default-scheduler"
	DefaultPodInitialBackoff    = 1 * time.Second
	DefaultPodMaxBackoff        = 10 * time.Second
	DefaultUnschedulableTimeout = 5 * time.Minute
	DefaultBindTimeout          = 30 * time.Second
	DefaultAPITimeout           = 10 * time.Second
	DefaultCycleTimeout         = 10 * time.Second
	// DefaultBindingConditionsTimeout is Kubernetes' default of the
	// DynamicResources plugin's bindingTimeout (10 minutes).
	DefaultBindingConditionsTimeout = 600 * time.Second
)

// Config configures a Scheduler. Zero values take the defaults above.
type Config struct {
	// Client talks to the API server. Required.
	Client *client.Client
	// Factory, when set, shares its informers with other components of the
	// process (allot up); the scheduler starts the informers it asks for.
	Factory *client.Factory
	// SchedulerName: only pods whose spec.schedulerName equals it are
	// scheduled. It is also the events' reporting component.
	SchedulerName string
	// ScoreStrategy is NodeResourcesFit's: LeastAllocated (spread, the
	// default) or MostAllocated (pack).
	ScoreStrategy plugins.ScoreStrategy
	// PodInitialBackoff doubles per failed attempt up to PodMaxBackoff.
	PodInitialBackoff time.Duration
	PodMaxBackoff     time.Duration
	// UnschedulableTimeout is the safety net: an unschedulable pod is
	// retried after this long even if no event moved it.
	UnschedulableTimeout time.Duration
	// BindTimeout bounds one pod's binding step (contributors and the
	// POST of the Binding).
	BindTimeout time.Duration
	// BindingConditionsTimeout bounds how long a pod whose devices have
	// binding conditions waits, its claims allocated, for the conditions
	// to be True before the allocation is released and the pod retried
	// (Kubernetes' DynamicResourcesArgs.bindingTimeout).
	BindingConditionsTimeout time.Duration
	// APITimeout bounds every other API call (status patches, reads).
	APITimeout time.Duration
	// CycleTimeout bounds one scheduling cycle's plugin calls.
	CycleTimeout time.Duration
	// Parallelism of filtering and scoring; 0 is one goroutine per
	// framework.NodesPerWorker nodes, at most GOMAXPROCS.
	Parallelism int
	// PercentageOfNodesToScore is the share of the nodes a cycle looks
	// for feasible ones among before it stops filtering and scores what it
	// found, as kube-scheduler's option of that name: 0 is adaptive (50 %
	// at 100 nodes down to 5 % at 5,625 and more), 100 every node. At
	// least 100 nodes are looked at, and all of them when no node fits.
	PercentageOfNodesToScore int
	// ExtraPlugins run after the default plugins (the DRA plugin).
	ExtraPlugins []framework.Plugin
	// Metrics receives the scheduler's metrics; nil creates a private
	// registry (see Scheduler.Metrics).
	Metrics *Metrics
	// Logger; nil is slog.Default().
	Logger *slog.Logger
	// Identity is the events' reporting instance (default: host name).
	Identity string
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.SchedulerName == "" {
		c.SchedulerName = DefaultSchedulerName
	}
	s, err := plugins.ParseScoreStrategy(string(c.ScoreStrategy))
	if err != nil {
		return c, err
	}
	c.ScoreStrategy = s
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.PodInitialBackoff, DefaultPodInitialBackoff}, {&c.PodMaxBackoff, DefaultPodMaxBackoff},
		{&c.UnschedulableTimeout, DefaultUnschedulableTimeout}, {&c.BindTimeout, DefaultBindTimeout},
		{&c.APITimeout, DefaultAPITimeout}, {&c.CycleTimeout, DefaultCycleTimeout},
		{&c.BindingConditionsTimeout, DefaultBindingConditionsTimeout},
	} {
		if *d.v < 0 {
			return c, errors.New("scheduler timers must not be negative")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100 {
		return c, fmt.Errorf("percentage of nodes to score %d: must be from 0 (adaptive) to 100 (every node)", c.PercentageOfNodesToScore)
	}
	if c.PodMaxBackoff < c.PodInitialBackoff {
		return c, fmt.Errorf("pod max backoff %s is shorter than the initial backoff %s", c.PodMaxBackoff, c.PodInitialBackoff)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	return c, nil
}
