package main

import "github.com/spf13/cobra"

// addClientCommands adds the kubectl-like client commands.
func addClientCommands(root *cobra.Command) {}
