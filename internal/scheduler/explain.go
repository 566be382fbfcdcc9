package scheduler

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/extensions"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/client"
)

// ListSnapshot builds a snapshot from one List of nodes, one of pods and
// one of each kind the scheduler's extensions read (the DRA kinds:
// extensions.ExtendListed), for
// `allot explain`. Each List gets its own timeout.
func ListSnapshot(ctx context.Context, c *client.Client, timeout time.Duration) (*framework.Snapshot, error) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	nodes, err := c.Nodes().List(lctx, metav1.ListOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	lctx, cancel = context.WithTimeout(ctx, timeout)
	pods, err := c.Pods("").List(lctx, metav1.ListOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	ns := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		ns[i] = &nodes.Items[i]
	}
	ps := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		ps[i] = &pods.Items[i]
	}
	return extensions.ExtendListed(ctx, c, timeout, framework.NewSnapshot(ns, ps))
}

// Explain diagnoses pod over snap as if it were pending now: a bound pod
// is taken off its node (so its own requests do not count against it)
// and its spec.nodeName cleared, so that every node is judged.
func Explain(ctx context.Context, fw *framework.Framework, snap *framework.Snapshot, pod *corev1.Pod) *framework.Diagnosis {
	if pod.Spec.NodeName != "" {
		snap = snap.WithoutPod(pod)
		pod = pod.DeepCopy()
		pod.Spec.NodeName = ""
	}
	return framework.Diagnose(ctx, fw, snap, pod)
}

// WriteExplanation prints a diagnosis for people: where the pod is, its
// PodScheduled or ResourceClaimsAllocated condition unless True, the
// scheduler's verdict, a table of every node's result (NODE, RESULT,
// PLUGIN, REASON; one row per rejecting plugin), and the scores of the
// feasible nodes.
func WriteExplanation(w io.Writer, pod *corev1.Pod, d *framework.Diagnosis) error {
	ew := &errWriter{w: w}
	ew.printf("Pod:        %s/%s\n", pod.Namespace, pod.Name)
	ew.printf("Scheduler:  %s\n", pod.Spec.SchedulerName)
	switch {
	case pod.Spec.NodeName != "":
		ew.printf("Node:       %s (bound; judged below as if pending, without its own requests)\n", pod.Spec.NodeName)
	default:
		ew.printf("Node:       <none> (pending)\n")
	}
	for _, c := range []*corev1.PodCondition{PodScheduledCondition(pod), ClaimsAllocatedCondition(pod)} {
		if c != nil && c.Status != corev1.ConditionTrue {
			ew.printf("Condition:  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	switch {
	case d.Status.IsSuccess():
		ew.printf("Verdict:    fits %d of %d nodes; the scheduler would choose %s\n", len(d.Feasible()), d.NumNodes, d.Selected)
	case d.PreFilter != nil:
		ew.printf("Verdict:    %s (plugin %s, before any node was looked at): %s\n", d.PreFilter.Code(), d.PreFilter.Plugin(), d.Message())
		return ew.err
	default:
		ew.printf("Verdict:    %s: %s\n", d.Status.Code(), d.Message())
	}
	ew.printf("\n")
	writeNodeTable(ew, d)
	writeScoreTable(ew, d)
	return ew.err
}

func writeNodeTable(ew *errWriter, d *framework.Diagnosis) {
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tRESULT\tPLUGIN\tREASON")
	for _, r := range d.Nodes {
		if r.Feasible() {
			result := "Feasible"
			if r.Node == d.Selected {
				result = "Selected"
			}
			fmt.Fprintf(tw, "%s\t%s\t-\tscore %d\n", r.Node, result, r.Score)
			continue
		}
		for _, st := range r.Rejections {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Node, st.Code(), st.Plugin(), oneLine(st.Message()))
		}
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}

func writeScoreTable(ew *errWriter, d *framework.Diagnosis) {
	feasible := d.Feasible()
	if len(feasible) == 0 || len(feasible[0].Scores) == 0 {
		return
	}
	ew.printf("\nScores of feasible nodes (normalized 0-100, times weight):\n")
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	head := []string{"NODE", "TOTAL"}
	for _, s := range feasible[0].Scores {
		head = append(head, fmt.Sprintf("%s(x%d)", s.Plugin, s.Weight))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range feasible {
		row := []string{r.Node, fmt.Sprint(r.Score)}
		for _, s := range r.Scores {
			row = append(row, fmt.Sprint(s.Score))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
