// Package plugins assembles the default scheduling framework from allot's
// in-tree plugins. The scheduler, `allot explain` and simulations all
// build their framework here, so they judge pods with the same code.
package plugins

import (
	"maps"

	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/internal/scheduler/plugins/nodeaffinity"
	"allot.dev/allot/internal/scheduler/plugins/nodename"
	"allot.dev/allot/internal/scheduler/plugins/nodeready"
	"allot.dev/allot/internal/scheduler/plugins/noderesources"
	"allot.dev/allot/internal/scheduler/plugins/nodeunschedulable"
	"allot.dev/allot/internal/scheduler/plugins/tainttoleration"
)

// Options configure the default framework.
type Options struct {
	// ScoreStrategy of NodeResourcesFit; "" is LeastAllocated.
	ScoreStrategy noderesources.Strategy
	// Parallelism of filtering and scoring; 0 is one goroutine per
	// framework.NodesPerWorker nodes, at most GOMAXPROCS.
	Parallelism int
	// NodesToFind is the framework's option of that name: nil filters
	// every node.
	NodesToFind func(n int) int
	// Extra plugins run after the default ones at every extension point
	// they implement (the DRA plugin, test plugins).
	Extra []framework.Plugin
	// Weights override DefaultWeights, by plugin name.
	Weights map[string]int64
	// DynamicResources is the DRA plugin instance to use; nil creates one.
	// A scheduler passes the same instance to NewDefaultFramework and
	// NewClaimFramework so that both see the same in-memory reservations.
	DynamicResources *dynamicresources.DynamicResources
}

// ScoreStrategy is NodeResourcesFit's score strategy, for callers that
// reach the plugins only through this registry (the scheduler's core).
type ScoreStrategy = noderesources.Strategy

// ParseScoreStrategy is noderesources.ParseStrategy.
func ParseScoreStrategy(s string) (ScoreStrategy, error) { return noderesources.ParseStrategy(s) }

// DefaultWeights are kube-scheduler's default score weights.
var DefaultWeights = map[string]int64{
	tainttoleration.Name: 3,
	nodeaffinity.Name:    2,
	noderesources.Name:   1,
}

// Default returns the default plugins in filter order: the cheap,
// unresolvable node checks first, resources, then DynamicResources
// (o.DynamicResources, or a new instance each call: it holds the in-memory
// claim reservations of one scheduler or simulation).
func Default(o Options) ([]framework.Plugin, error) {
	fit, err := noderesources.New(o.ScoreStrategy)
	if err != nil {
		return nil, err
	}
	return []framework.Plugin{
		nodeunschedulable.New(),
		nodename.New(),
		nodeready.New(),
		tainttoleration.New(),
		nodeaffinity.New(),
		fit,
		draPlugin(o),
	}, nil
}

func draPlugin(o Options) *dynamicresources.DynamicResources {
	if o.DynamicResources != nil {
		return o.DynamicResources
	}
	return dynamicresources.New()
}

// NewDefaultFramework returns the framework of the default plugins plus
// o.Extra.
func NewDefaultFramework(o Options) (*framework.Framework, error) {
	ps, err := Default(o)
	if err != nil {
		return nil, err
	}
	weights := maps.Clone(DefaultWeights)
	maps.Copy(weights, o.Weights)
	return framework.New(append(ps, o.Extra...), framework.Options{Parallelism: o.Parallelism, Weights: weights, NodesToFind: o.NodesToFind})
}

// NewClaimFramework returns the framework of a claim cycle: for a pod
// given a node by hand, only whether its claims can be allocated and
// reserved on that node matters, so it runs NodeName and DynamicResources
// (o.DynamicResources) and nothing else: resource fit, taints, affinity
// and readiness are the node agent's business once a pod is placed.
// o.Extra, o.Weights and o.ScoreStrategy are not used.
func NewClaimFramework(o Options) (*framework.Framework, error) {
	return framework.New([]framework.Plugin{nodename.New(), draPlugin(o)}, framework.Options{Parallelism: o.Parallelism})
}
