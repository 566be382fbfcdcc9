package main

import (
	"github.com/spf13/cobra"

	"allot.dev/allot/examples/gpu-driver/gpudriver"
)

func init() { exampleCommands = append(exampleCommands, newExampleGPUDriverCommand) }

func newExampleGPUDriverCommand() *cobra.Command {
	var cfg gpudriver.Config
	cmd := &cobra.Command{
		Use:   "gpu-driver",
		Short: "Run the kubelet plugin of the example structured DRA driver " + gpudriver.DriverName,
		Long: `Run the node side of the example DRA driver gpu.example.com on this machine:
simulated GPUs (by default seed 002's whole GPU and partitionable GPU, or the
partitionable model in --config, reloaded when the file changes) published to
the node agent through the plugin registration directory, and claims
prepared as CDI devices (gpu.example.com/gpu=CLAIM-UID) in --cdi-dir.

With --publish=v1 it speaks the kubelet's DRA API instead: it publishes
resource.k8s.io/v1 ResourceSlices of --node-name itself (two whole GPUs
unless --config names a model without partitions) and reads the v1 claims
it prepares, with the node-driver token in --kubeconfig (allot token create
--role node-driver --name gpu.example.com@NODE --kubeconfig FILE).

The same program builds on its own: go build ./examples/gpu-driver.`,
		Example: `  allot example gpu-driver
  allot example gpu-driver --config my-gpus.yaml --cdi-dir /var/run/cdi \
      --plugins-registry-dir /tmp/node/plugins_registry --plugin-dir /tmp/node/plugins/gpu.example.com
  allot example gpu-driver --publish=v1 --node-name node-1 --kubeconfig gpu-node-1.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return gpudriver.Run(cmd.Context(), cfg)
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}
