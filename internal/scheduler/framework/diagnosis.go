package framework

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// PluginScore is one score plugin's normalized score of a node and the
// plugin's weight; the node's total adds Score*Weight over plugins.
type PluginScore struct {
	Plugin string `json:"plugin"`
	Score  int64  `json:"score"`
	Weight int64  `json:"weight"`
}

// NodeResult is what one cycle found about one node.
type NodeResult struct {
	Node string `json:"node"`
	// Rejections are the statuses of the Filter plugins that rejected the
	// node, in plugin order: only the first when scheduling, all of them
	// in Diagnose. Empty means the node is feasible.
	Rejections []*Status `json:"-"`
	// Score is the weighted total of a feasible node, when scored.
	Score int64 `json:"score,omitempty"`
	// Scores are the plugins' parts of Score, in Diagnose only.
	Scores []PluginScore `json:"scores,omitempty"`

	info  *NodeInfo
	index int // in the snapshot's Nodes
}

// Feasible reports whether no filter rejected the node.
func (r *NodeResult) Feasible() bool { return len(r.Rejections) == 0 }

// Diagnosis is the record of one run of the pipeline for one pod: the
// outcome, and per node who said no and why, or the score. The scheduler
// builds its PodScheduled message and its queueing decision from it;
// `allot explain` prints it.
type Diagnosis struct {
	// Pod is namespace/name.
	Pod string
	// PreFilter is set when a PreFilter plugin stopped the cycle before
	// any node was looked at; Nodes is then empty.
	PreFilter *Status
	// Nodes has one entry per node looked at, in name order: every node
	// of the snapshot, unless Schedule stopped early with enough feasible
	// nodes (Options.NodesToFind).
	Nodes []NodeResult
	// Selected is the chosen node; empty unless Status is Success.
	Selected string
	// Status is the outcome: Success (nil), Unschedulable (some node may
	// fit after other pods leave), UnschedulableAndUnresolvable, Wait, or
	// Error (the cycle failed; Nodes may be incomplete).
	Status *Status
	// NumNodes is the number of nodes in the snapshot.
	NumNodes int
}

// Feasible returns the nodes that passed every filter.
func (d *Diagnosis) Feasible() []*NodeResult {
	var out []*NodeResult
	for i := range d.Nodes {
		if d.Nodes[i].Feasible() {
			out = append(out, &d.Nodes[i])
		}
	}
	return out
}

// Node returns the result of one node.
func (d *Diagnosis) Node(name string) (*NodeResult, bool) {
	i := slices.IndexFunc(d.Nodes, func(r NodeResult) bool { return r.Node == name })
	if i < 0 {
		return nil, false
	}
	return &d.Nodes[i], true
}

// RejectingPlugins returns, sorted, the plugins that rejected the pod or
// made it wait, at PreFilter or on some node. The queue retries the pod
// on the events these plugins registered.
func (d *Diagnosis) RejectingPlugins() []string {
	var out []string
	add := func(st *Status) {
		if (st.IsRejected() || st.Code() == Wait) && !slices.Contains(out, st.Plugin()) {
			out = append(out, st.Plugin())
		}
	}
	add(d.PreFilter)
	for _, r := range d.Nodes {
		for _, st := range r.Rejections {
			add(st)
		}
	}
	sort.Strings(out)
	return out
}

// NoNodesMessage is the message when the snapshot has no nodes.
const NoNodesMessage = "no nodes available to schedule pods"

// Message summarises why the pod fits no node, as kube-scheduler words
// it: "0/3 nodes are available: 1 node(s) didn't match Pod's node
// affinity/selector, 2 Insufficient cpu." Each node counts once per
// distinct reason. A Wait at PreFilter gives the plugin's message alone.
func (d *Diagnosis) Message() string {
	if st := d.Status; st.Code() == Error {
		return "scheduling failed: " + st.Message()
	}
	if d.PreFilter != nil {
		if d.PreFilter.Code() == Wait {
			return d.PreFilter.Message()
		}
		return fmt.Sprintf("0/%d nodes are available: %s.", d.NumNodes, d.PreFilter.Message())
	}
	if d.NumNodes == 0 {
		return NoNodesMessage
	}
	counts := map[string]int{}
	for _, r := range d.Nodes {
		seen := map[string]bool{}
		for _, st := range r.Rejections {
			for _, reason := range st.Reasons() {
				if !seen[reason] {
					seen[reason] = true
					counts[reason]++
				}
			}
		}
	}
	parts := make([]string, 0, len(counts))
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", d.NumNodes, strings.Join(parts, ", "))
}

// NodeInfo returns the node the result is about.
func (r *NodeResult) NodeInfo() *NodeInfo { return r.info }
