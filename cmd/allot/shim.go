package main

import (
	"os"

	"github.com/spf13/cobra"

	"allot.dev/allot/internal/node/runtime/runc"
)

// newRuncShimCommand is the hidden per-container shim the runc runtime
// starts (package runc, ShimMain): it runs the container with runc,
// outlives the node agent, and records the exit status in the bundle.
func newRuncShimCommand() *cobra.Command {
	return &cobra.Command{
		Use:                runc.ShimCommandName + " BUNDLE",
		Short:              "Run one container for the runc runtime (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(runc.ShimMain(args))
		},
	}
}
