package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"allot.dev/allot/internal/cluster"
	"allot.dev/allot/internal/node"
)

func newDownCommand() *cobra.Command {
	var o cluster.DownOptions
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Clean up after an allot up that was killed: stop its containers, unmount, remove stale sockets",
		Long: `Clean what a cluster's data dir was left with when its allot up did not
exit by itself (kill -9, a crash, a power cut): stop the local node's
containers (SIGTERM, then SIGKILL after --grace-period; their shims exit
with them), unmount their root filesystems and any other mount under the
data dir and node root dir, remove the unix sockets nothing listens on,
and delete the node's containers from runc's state (runc delete --force on
the node root's own runc --root; containers of other roots stay).

The cluster's state stays: etcd's data, tokens, certificates, container
records (exit codes, logs) and prepared claims. The next allot up on the data dir starts the
pods again per their restart policy. Ctrl-C on allot up does all of this
by itself; down refuses to touch a data dir that a running process holds.`,
		Example: `  allot down                          # the default data dir
  allot down --data-dir _output/cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			rep, err := cluster.Down(cmd.Context(), o)
			if rep != (cluster.DownReport{}) || err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", o.DataDir, rep)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", defaultDataDir(), "the cluster's data dir (allot up --data-dir)")
	f.StringVar(&o.NodeRootDir, "node-root-dir", "", "the local node's root dir, if allot up had --node-root-dir (default DATA-DIR/node)")
	f.DurationVar(&o.GracePeriod, "grace-period", node.DefaultShutdownGracePeriod, "time each running container has between SIGTERM and SIGKILL")
	return cmd
}
