package main

import (
	"github.com/spf13/cobra"

	"allot.dev/allot/internal/gctune"
)

func newRootCommand() *cobra.Command {
	gcPercent := gctune.DefaultPercent
	root := &cobra.Command{
		Use:           "allot",
		Short:         "allot hands accelerators to workloads",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			gctune.Apply(gcPercent, cmd.Flags().Changed("gc-percent"))
		},
	}
	root.PersistentFlags().IntVar(&gcPercent, "gc-percent", gcPercent,
		"garbage collector target (GOGC) of this process; the GOGC environment variable, when set, replaces the default; negative turns the collector off")
	root.AddCommand(newUpCommand(), newDownCommand(), newAPIServerCommand(), newTokenCommand(), newSimulateCommand(), newControllerManagerCommand(),
		newImageCommand(), newRuncShimCommand(), newNodeCommand(), newSimNodesCommand(),
		newSchedulerCommand(), newExplainCommand(), newExampleCommand())
	addClientCommands(root)
	root.AddCommand(newVersionCommand())
	return root
}
