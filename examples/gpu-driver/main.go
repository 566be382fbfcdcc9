// Command gpu-driver is the node side of the example structured DRA driver
// gpu.example.com: simulated GPUs (one whole, one partitionable) published
// to allot's node agent, and claims prepared as CDI devices. It is the
// same program as `allot example gpu-driver`; see README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"allot.dev/allot/examples/gpu-driver/gpudriver"
)

func main() {
	var cfg gpudriver.Config
	fs := pflag.NewFlagSet("gpu-driver", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: gpu-driver [flags]\n\nThe kubelet plugin of the example DRA driver %s.\n\n%s", gpudriver.DriverName, fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gpu-driver: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := gpudriver.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "gpu-driver:", err)
		os.Exit(1)
	}
}
