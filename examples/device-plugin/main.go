// Command device-plugin is an example Kubernetes device plugin
// (deviceplugin/v1beta1) with simulated devices, for trying allot's device
// manager (or a kubelet) without hardware. It serves on <dir>/<socket>,
// registers at <dir>/kubelet.sock, and registers again whenever
// kubelet.sock is re-created (the node agent restarted). The same plugin
// runs as `allot example device-plugin`; see package deviceplugin for the
// device file, the control file and SIGUSR1.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"allot.dev/allot/examples/device-plugin/deviceplugin"
)

func main() {
	var cfg deviceplugin.Config
	cfg.AddFlags(flag.CommandLine)
	flag.Parse()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := deviceplugin.Run(ctx, cfg); err != nil {
		cfg.Logger.Error("device plugin failed", "err", err)
		os.Exit(1)
	}
}
