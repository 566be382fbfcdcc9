package main

import (
	"github.com/spf13/cobra"
)

// exampleCommands are the subcommands of "allot example": the example
// drivers, runnable from the allot binary alone. Each file that adds one
// appends its constructor in an init function.
var exampleCommands []func() *cobra.Command

func newExampleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "example",
		Short: "Run the example drivers (also buildable on their own under examples/)",
	}
	for _, f := range exampleCommands {
		cmd.AddCommand(f())
	}
	return cmd
}
