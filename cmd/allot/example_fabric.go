package main

import (
	"github.com/spf13/cobra"

	"allot.dev/allot/examples/fabric-driver/fabricdriver"
	"allot.dev/allot/pkg/client"
)

func init() {
	exampleCommands = append(exampleCommands, newExampleFabricControllerCommand, newExampleFabricPluginCommand)
}

// newExampleFabricControllerCommand runs the controller of the example
// control-plane driver fabric.example.com.
func newExampleFabricControllerCommand() *cobra.Command {
	var (
		cfg   fabricdriver.ControllerConfig
		flags clientFlags
	)
	cmd := &cobra.Command{
		Use:   "fabric-controller",
		Short: "Run the controller of the example control-plane DRA driver " + fabricdriver.DriverName,
		Long: `Run the controller of the example control-plane DRA driver
fabric.example.com: it allocates claims of classes with controllerName
fabric.example.com from pools of network-attached accelerators (--config, or
the built-in pools), each reachable from the nodes with its labels. Immediate
claims are allocated at once; WaitForFirstConsumer claims through the pod's
PodSchedulingContext (unsuitable nodes, then the selected node). Failures are
Warning events on the claims.

It needs the CRD and class of examples/fabric-driver/deploy and a kubeconfig
with a driver token:
  allot token create --role driver --name fabric.example.com

Run one per cluster; the node side is allot example fabric-plugin.`,
		Example: `  allot example fabric-controller --kubeconfig fabric-driver.kubeconfig --config pools.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client.NewForKubeconfig(flags.kubeconfig)
			if err != nil {
				return err
			}
			cfg.Controller.Client, cfg.Controller.Namespace = c, flags.namespace
			return fabricdriver.RunController(cmd.Context(), cfg)
		},
	}
	flags.add(cmd)
	f := cmd.Flags()
	f.Lookup("kubeconfig").Usage = "kubeconfig with a driver token for fabric.example.com (default: $KUBECONFIG, else the one the last allot up wrote)"
	f.Lookup("namespace").Usage = "handle only claims of this namespace (default: all namespaces)"
	cfg.AddFlags(f)
	return cmd
}

// newExampleFabricPluginCommand runs the kubelet plugin of the example
// control-plane driver fabric.example.com.
func newExampleFabricPluginCommand() *cobra.Command {
	var cfg fabricdriver.PluginConfig
	cmd := &cobra.Command{
		Use:   "fabric-plugin",
		Short: "Run the kubelet plugin of the example control-plane DRA driver " + fabricdriver.DriverName,
		Long: `Run the node side of the example control-plane DRA driver fabric.example.com:
it registers with the node agent through the plugin registration directory,
publishes no structured resources, and prepares claims the controller
allocated by "attaching" their units (a file per unit in
--attach-dir/CLAIM-UID/) and writing a CDI spec
(fabric.example.com/accelerator=CLAIM-UID) with FABRIC_UNITS, FABRIC_POOL and
FABRIC_MODEL in --cdi-dir. Give it the controller's --config.`,
		Example: `  allot example fabric-plugin --config pools.yaml --cdi-dir /var/run/cdi \
      --plugins-registry-dir /tmp/node/plugins_registry --plugin-dir /tmp/node/plugins/fabric.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fabricdriver.RunPlugin(cmd.Context(), cfg)
		},
	}
	cfg.AddFlags(cmd.Flags())
	return cmd
}
