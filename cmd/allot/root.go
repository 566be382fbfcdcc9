package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "allot",
		Short:         "allot hands accelerators to workloads",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUpCommand(), newAPIServerCommand(), newTokenCommand(), newSimulateCommand(), newControllerManagerCommand(),
		newImageCommand(), newRuncShimCommand(), newNodeCommand(), newSimNodesCommand(),
		newSchedulerCommand(), newExplainCommand(), newExampleCommand())
	addClientCommands(root)
	return root
}
