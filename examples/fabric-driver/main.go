// Command fabric-driver is the example control-plane DRA driver
// fabric.example.com in two roles: `fabric-driver controller` allocates
// claims (one per cluster, with a driver token), `fabric-driver plugin`
// attaches them on a node. They are the same programs as
// `allot example fabric-controller` and `allot example fabric-plugin`;
// see README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"allot.dev/allot/examples/fabric-driver/fabricdriver"
	"allot.dev/allot/pkg/client"
)

const usage = `Usage: fabric-driver controller|plugin [flags]

The example control-plane DRA driver %s:
  controller  allocates claims of its class (needs a driver token)
  plugin      the kubelet plugin: attaches allocated units on this node

`

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "controller" && os.Args[1] != "plugin") {
		fmt.Fprintf(os.Stderr, usage, fabricdriver.DriverName)
		os.Exit(2)
	}
	role := os.Args[1]
	fs := pflag.NewFlagSet("fabric-driver "+role, pflag.ContinueOnError)
	run := flags(role, fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, usage+"Flags of %s:\n%s", fabricdriver.DriverName, role, fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fabric-driver %s: unexpected arguments %q\n", role, fs.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "fabric-driver %s: %v\n", role, err)
		os.Exit(1)
	}
}

// flags binds the role's flags and returns how to run it.
func flags(role string, fs *pflag.FlagSet) func(context.Context) error {
	if role == "plugin" {
		var cfg fabricdriver.PluginConfig
		cfg.AddFlags(fs)
		return func(ctx context.Context) error { return fabricdriver.RunPlugin(ctx, cfg) }
	}
	var (
		cfg        fabricdriver.ControllerConfig
		kubeconfig string
	)
	cfg.AddFlags(fs)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with a driver token for "+fabricdriver.DriverName+" (default: $KUBECONFIG, else the one the last allot up wrote)")
	fs.StringVarP(&cfg.Controller.Namespace, "namespace", "n", "", "handle only claims of this namespace (default: all)")
	return func(ctx context.Context) error {
		c, err := client.NewForKubeconfig(kubeconfig)
		if err != nil {
			return err
		}
		cfg.Controller.Client = c
		return fabricdriver.RunController(ctx, cfg)
	}
}
