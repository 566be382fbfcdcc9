package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"allot.dev/allot/examples/gpu-driver/translator"
	"allot.dev/allot/pkg/client"
)

func init() { exampleCommands = append(exampleCommands, newExampleTranslatorCommand) }

// newExampleTranslatorCommand runs the controller of the example driver
// gpu.example.com that turns GpuClaimParameters into
// ResourceClaimParameters.
func newExampleTranslatorCommand() *cobra.Command {
	var (
		cfg   translator.Config
		flags clientFlags
	)
	cmd := &cobra.Command{
		Use:   "gpu-translator",
		Short: "Translate GpuClaimParameters of the example driver gpu.example.com into ResourceClaimParameters",
		Long: `Run the translator of the example DRA driver gpu.example.com: for each
GpuClaimParameters it keeps a ResourceClaimParameters of the same namespace
and name, generated from it and owned by it, with CEL selectors built from
spec.minimumMemory and spec.minimumRuntimeVersion, spec.count required
instances, and the spec passed to the kubelet plugin as vendor parameters.
Problems (an invalid spec, a ResourceClaimParameters of that name that it
did not generate) are reported as Warning events on the GpuClaimParameters.

It needs the CRD of examples/gpu-driver/deploy/crd.yaml (it waits for it)
and a kubeconfig with a driver token:
  allot token create --role driver --name gpu.example.com`,
		Example: `  allot example gpu-translator --kubeconfig gpu-driver.kubeconfig`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client.NewForKubeconfig(flags.kubeconfig)
			if err != nil {
				return err
			}
			cfg.Client, cfg.Namespace = c, flags.namespace
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return translator.Run(cmd.Context(), cfg)
		},
	}
	flags.add(cmd)
	f := cmd.Flags()
	// The shared client flags, with this command's meaning: a driver's
	// identity, and every namespace unless one is given.
	f.Lookup("kubeconfig").Usage = "kubeconfig with a driver token for gpu.example.com (default: $KUBECONFIG, else the one the last allot up wrote)"
	f.Lookup("namespace").Usage = "translate only in this namespace (default: all namespaces)"
	f.IntVar(&cfg.Workers, "workers", 0, "objects translated at once (default 2)")
	f.DurationVar(&cfg.Resync, "resync", 0, "how often every GpuClaimParameters is checked again (default 10m)")
	return cmd
}
