package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
)

// The fence rule (issue 29 point 1): a node agent that cannot reach the API
// server for its --self-fence-after stops the pods holding devices other
// nodes can reach, and pods that opt in (annotation allot.dev/fence=true),
// and nothing else: an API server outage must never stop a cluster's
// workloads. The run takes the API server down for longer than the agents'
// fence time (outages) and checks that no other pod was stopped.

// RuleFencedNodeLocal is broken by a pod stopped by its node's fence that
// neither opted in nor was seen holding a device other nodes can reach.
const RuleFencedNodeLocal = "pod without multi-node devices stopped by the fence"

// RuleOutageUnfenced is broken by a run whose API server outages raised no
// fence on any node agent: the outages then tested nothing.
const RuleOutageUnfenced = "API server outages longer than the fence time raised no fence"

// reasonFenced is the status.reason the node agent gives a pod its fence
// stopped (internal/node.ReasonFenced; a test pins the two equal).
const reasonFenced = "NodeFenced"

// MultiNodePods are the pods some claim in claims is allocated and
// reserved for whose allocation reaches other nodes than one (a v1alpha2
// availableOnNodes, a v1 nodeSelector, that is not one node by name).
func MultiNodePods(claims Claims) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, c := range claims.stored() {
		if !c.multiNode {
			continue
		}
		for _, uid := range c.reserved {
			out[uid] = true
		}
	}
	return out
}

// IsFenced reports whether the pod was stopped by its node's fence.
func IsFenced(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == reasonFenced
}

// optsIn reports whether the pod asked to be fenced whatever it holds. The
// harness parses the annotation itself, as the API documents it (a
// boolean), rather than asking the agent's code.
func optsIn(p *corev1.Pod) bool {
	v, err := strconv.ParseBool(p.Annotations[fence.AnnotationPodFence])
	return err == nil && v
}

// CheckFenceSpared reports pods stopped by the fence that did not opt in
// and were never seen holding a multi-node claim (multiNode: pods seen
// holding one, by UID, from every snapshot of the run: a fenced pod's
// claims may be released before the pod is read).
func CheckFenceSpared(pods []corev1.Pod, multiNode map[types.UID]bool) []Violation {
	var out []Violation
	for i := range pods {
		p := &pods[i]
		if !IsFenced(p) || optsIn(p) || multiNode[p.UID] {
			continue
		}
		out = append(out, Violation{RuleFencedNodeLocal, fmt.Sprintf("pod %s/%s (uid %s, %d claims) on node %s: %s",
			p.Namespace, p.Name, p.UID, len(p.Spec.ResourceClaims), p.Spec.NodeName, p.Status.Message)})
	}
	return out
}

// FenceReport is what the run's API server outages did.
type FenceReport struct {
	// Outages taken, and each one's length: from the kill until the API
	// server listened again.
	Outages []time.Duration
	// PodsOptedIn were created with allot.dev/fence=true.
	PodsOptedIn int
	// RunningAtOutage were Running when an outage began (opted in or not);
	// of those, SparedThrough did not opt in and then Succeeded.
	RunningAtOutage, RunningAtOutageOptedIn, SparedThrough int
	// Raised counts the fences the node agents raised, from their logs.
	Raised int
	// Fenced pods were stopped by their node's fence (reason NodeFenced),
	// FencedOptedIn of them opted in, FencedMultiNode held a multi-node
	// claim; any other is a violation.
	Fenced, FencedOptedIn, FencedMultiNode int
}

func (f FenceReport) String() string {
	if len(f.Outages) == 0 && f.Fenced == 0 {
		return "API server outages: none\n"
	}
	lengths := make([]string, len(f.Outages))
	for i, d := range f.Outages {
		lengths[i] = d.Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("API server outages: %d (%s); fences raised by the node agents: %d; pods running when one began: %d (%d opted into the fence), %d of the others then Succeeded; "+
		"pods stopped by the fence (NodeFenced): %d (%d opted in, %d with a multi-node claim; %d created with allot.dev/fence=true)\n",
		len(f.Outages), strings.Join(lengths, ", "), f.Raised, f.RunningAtOutage, f.RunningAtOutageOptedIn, f.SparedThrough,
		f.Fenced, f.FencedOptedIn, f.FencedMultiNode, f.PodsOptedIn)
}

// fenceState is the run's record for the fence rule; run.mu guards it.
type fenceState struct {
	// multiNode: pods seen holding a multi-node claim, by UID.
	multiNode map[types.UID]bool
	// seen: fenced pods already counted; atOutage: pods Running when an
	// outage began, and whether each opted in; done: those of them
	// counted as finished.
	seen, done map[types.UID]bool
	atOutage   map[types.UID]bool
}

func newFenceState() fenceState {
	return fenceState{multiNode: map[types.UID]bool{}, seen: map[types.UID]bool{}, done: map[types.UID]bool{}, atOutage: map[types.UID]bool{}}
}

// noteFenced counts the fenced pods among pods, once each, checks the
// fence rule on them, and counts pods that ran through an outage and
// finished; r.mu is held.
func (r *run) noteFenced(pods []corev1.Pod) {
	st, rep := &r.fence, &r.rep.Fence
	for i := range pods {
		p := &pods[i]
		if optIn, ok := st.atOutage[p.UID]; ok && !optIn && !st.done[p.UID] && p.Status.Phase == corev1.PodSucceeded {
			st.done[p.UID] = true
			rep.SparedThrough++
		}
		if !IsFenced(p) || st.seen[p.UID] {
			continue
		}
		st.seen[p.UID] = true
		rep.Fenced++
		switch {
		case optsIn(p):
			rep.FencedOptedIn++
		case st.multiNode[p.UID]:
			rep.FencedMultiNode++
		}
		r.addViolations(CheckFenceSpared([]corev1.Pod{*p}, st.multiNode))
	}
}

// outages takes the API server down for cfg.Outage, OutageEvery/2 into
// the churn and every OutageEvery after, while the churn lasts. The
// killer leaves it alone meanwhile (apiMu).
func (r *run) outages(ctx context.Context) {
	if r.cfg.Outage <= 0 || r.cfg.OutageEvery <= 0 {
		return
	}
	next := r.cfg.OutageEvery / 2
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		next = r.cfg.OutageEvery
		r.outage(ctx)
	}
}

// outage is one API server outage: it notes the pods running, kills the
// API server, waits cfg.Outage (less if the churn ends), and starts it
// again.
func (r *run) outage(ctx context.Context) {
	r.apiMu.Lock()
	defer r.apiMu.Unlock()
	pods, err := r.listPods(ctx)
	if err != nil {
		return // the API server is already down: try at the next one
	}
	r.mu.Lock()
	for i := range pods {
		if p := &pods[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			if _, ok := r.fence.atOutage[p.UID]; !ok {
				r.fence.atOutage[p.UID] = optsIn(p)
				r.rep.Fence.RunningAtOutage++
				if optsIn(p) {
					r.rep.Fence.RunningAtOutageOptedIn++
				}
			}
		}
	}
	r.mu.Unlock()
	r.logf("API server outage of %v (the agents fence after %v)", r.cfg.Outage, r.cfg.FenceAfter)
	start := time.Now()
	r.c.takeDown(r.c.apiserver)
	select {
	case <-ctx.Done():
	case <-time.After(r.cfg.Outage):
	}
	if err := r.c.restart(context.WithoutCancel(ctx), r.c.apiserver); err != nil {
		r.logf("restart apiserver after the outage: %v", err)
	}
	d := time.Since(start)
	r.logf("API server back after %v", d.Round(10*time.Millisecond))
	r.mu.Lock()
	r.rep.Fence.Outages = append(r.rep.Fence.Outages, d)
	r.mu.Unlock()
}

// fenceRaisedLog starts the line a node agent logs when it raises its
// fence (internal/node/selffence.go).
const fenceRaisedLog = "no heartbeat reached the API server for the fence time"

// countFences counts the fences the node agents raised, by their logs.
func (c *cluster) countFences() (int, error) {
	total := 0
	for _, n := range c.nodes {
		b, err := os.ReadFile(n.agent.log)
		if err != nil {
			return 0, fmt.Errorf("read %s's log: %w", n.name, err)
		}
		total += strings.Count(string(b), `msg="`+fenceRaisedLog)
	}
	return total, nil
}
