package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/cluster"
)

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage bearer tokens"}
	var role, name, dataDir, file, kubeconfig string
	create := &cobra.Command{
		Use:   "create",
		Short: "Add a token to the cluster's tokens file and print it",
		Long: `Add a token for a role: admin, user, scheduler, controller-manager,
node (--name is the node's name), driver (--name is the driver's name) or
node-driver (--name is DRIVER@NODE: a driver's kubelet plugin on one node).
The API server picks it up without a restart. With --kubeconfig, also
write a kubeconfig with the token and the cluster's address and CA (from
DATA-DIR/kubeconfig): the credentials to give a driver, for example

  allot token create --role node-driver --name gpu.example.com@node-1 \
    --kubeconfig gpu-node-1.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				file = filepath.Join(dataDir, "tokens.csv")
			}
			tok, err := auth.AppendToken(file, name, auth.Role(role))
			if err != nil {
				return err
			}
			if kubeconfig != "" {
				if err := cluster.KubeconfigFor(kubeconfig, filepath.Join(dataDir, "kubeconfig"), name, tok); err != nil {
					return fmt.Errorf("token added, but no kubeconfig written: %w", err)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&role, "role", "user", "role of the token")
	f.StringVar(&name, "name", "", "name of the user, node, driver or node-driver (DRIVER@NODE)")
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), "data dir of the cluster")
	f.StringVar(&file, "tokens-file", "", "tokens file (default DATA-DIR/tokens.csv)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "also write a kubeconfig with the token to this file")
	_ = create.MarkFlagRequired("name")
	cmd.AddCommand(create)
	return cmd
}
