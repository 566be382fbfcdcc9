package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/plugins/noderesources"
	"allot.dev/allot/pkg/client"
)

func newExplainCommand() *cobra.Command {
	var (
		kubeconfig, namespace, strategy string
		timeout                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "explain pod NAME",
		Short: "Explain why a pod is on its node, or why it is pending",
		Long: `Explain runs the scheduler's own plugins over the cluster as it is now
(one List of nodes and pods) for one pod, and prints for every node which
plugin rejected the pod and why, or the node's score. A bound pod is judged
as if it were pending, without its own requests on its node. For a pod
being deleted it says what the deletion waits for and how to force it.`,
		Example: "  allot explain pod trainer-0 -n ml",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := explainTarget(args)
			if err != nil {
				return err
			}
			st, err := noderesources.ParseStrategy(strategy)
			if err != nil {
				return err
			}
			return runExplain(cmd, kubeconfig, namespace, name, st, timeout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", client.DefaultKubeconfigPath(), "kubeconfig file ($KUBECONFIG, else the one the last 'allot up' wrote)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace (default: the kubeconfig context's, else \"default\")")
	f.StringVar(&strategy, "score-strategy", string(noderesources.LeastAllocated), "the scheduler's score strategy: LeastAllocated or MostAllocated")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "deadline of each API call and of the diagnosis")
	return cmd
}

// explainTarget accepts "pod NAME", "pods NAME", "po NAME" and "pod/NAME".
func explainTarget(args []string) (string, error) {
	kind, name := args[0], ""
	if k, n, ok := strings.Cut(args[0], "/"); ok && len(args) == 1 {
		kind, name = k, n
	} else if len(args) == 2 {
		name = args[1]
	}
	switch kind {
	case "pod", "pods", "po":
	default:
		return "", fmt.Errorf("explain works on pods: want `allot explain pod NAME`, got %q", kind)
	}
	if name == "" {
		return "", fmt.Errorf("explain needs a pod name: `allot explain pod NAME`")
	}
	return name, nil
}

func runExplain(cmd *cobra.Command, kubeconfig, namespace, name string, st noderesources.Strategy, timeout time.Duration) error {
	cfg, err := client.LoadConfig(kubeconfig)
	if err != nil {
		return err
	}
	if namespace == "" {
		namespace = cfg.Namespace
	}
	c, err := client.NewForConfig(cfg.REST)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	gctx, cancel := context.WithTimeout(ctx, timeout)
	pod, err := c.Pods(namespace).Get(gctx, name)
	cancel()
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	if writeTerminating(cmd.OutOrStdout(), pod) {
		return nil // being deleted: where it could run no longer matters
	}
	snap, err := scheduler.ListSnapshot(ctx, c, timeout)
	if err != nil {
		return err
	}
	fw, err := plugins.NewDefaultFramework(plugins.Options{ScoreStrategy: st})
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := scheduler.Explain(dctx, fw, snap, pod)
	if err := scheduler.WriteExplanation(cmd.OutOrStdout(), pod, d); err != nil {
		return err
	}
	devices, err := scheduler.PodDevices(ctx, c, pod, timeout)
	if err != nil {
		return err
	}
	if err := scheduler.WriteBindingWait(cmd.OutOrStdout(), pod, devices); err != nil {
		return err
	}
	return scheduler.WriteDevices(cmd.OutOrStdout(), devices)
}
