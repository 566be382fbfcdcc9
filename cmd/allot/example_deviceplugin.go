package main

import (
	"flag"
	"log/slog"

	"github.com/spf13/cobra"

	"allot.dev/allot/examples/device-plugin/deviceplugin"
)

func init() { exampleCommands = append(exampleCommands, newExampleDevicePluginCommand) }

// newExampleDevicePluginCommand runs examples/device-plugin in-process,
// with the flags of the standalone binary.
func newExampleDevicePluginCommand() *cobra.Command {
	var cfg deviceplugin.Config
	cmd := &cobra.Command{
		Use:   "device-plugin",
		Short: "Run the example device plugin (simulated devices, deviceplugin/v1beta1)",
		Long: `Run the example device plugin of examples/device-plugin: it serves
simulated devices from a YAML or JSON file on DIR/SOCKET, registers at
DIR/kubelet.sock, and registers again whenever kubelet.sock is re-created.
The control file lists unhealthy device IDs, one per line; SIGUSR1 flips
every device's health. See examples/device-plugin/README.md.`,
		Example: `  allot example device-plugin --config examples/device-plugin/example.yaml \
      --dir /var/lib/kubelet/device-plugins --control /tmp/unhealthy`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return deviceplugin.Run(cmd.Context(), cfg)
		},
	}
	fs := flag.NewFlagSet("device-plugin", flag.ContinueOnError)
	cfg.AddFlags(fs)
	cmd.Flags().AddGoFlagSet(fs)
	return cmd
}
