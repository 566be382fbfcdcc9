// Command upstreamdriver is a DRA driver built only on Kubernetes'
// kubelet plugin library, k8s.io/dynamic-resource-allocation/kubeletplugin
// and resourceslice, unmodified, at the version in go.mod. It is the proof
// that an upstream driver runs on an allot node: the e2e starts it beside
// the node agent (docs/design/kubelet-dra-v1.md §6).
//
// It publishes --gpus fake GPUs in one pool named after the node, and
// prepares a claim by writing a CDI spec with one device per allocated GPU
// that sets GPU_DEVICE_<index>=gpu-<index>. Test hooks: --state-file,
// --prepare-hold-file and --health-file; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// fatalError marks the cause of a shutdown that HandleError asked for.
type fatalError struct{ error }

func (e fatalError) Unwrap() error { return e.error }

// run starts the driver and serves until SIGTERM or SIGINT (exit 0) or a
// non-recoverable error (exit 1). Bad flags exit 2.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "upstreamdriver:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("driver", cfg.driverName, "node", cfg.nodeName)

	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)

	client, err := kubeClient(cfg.kubeconfig)
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	d := &driver{cfg: cfg, log: log, fatal: func(err error) { cancel(fatalError{err}) }}
	helper, err := start(ctx, cfg, d, client)
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	log.Info("serving", "registrationSocket", cfg.registrationSocket(), "draSocket", cfg.draSocket(),
		"cdiRoot", cfg.cdiRoot, "profile", cfg.profile, "devices", len(cfg.inventory().deviceNames(cfg.nodeName)))
	if cfg.satisfyBindingConditions >= 0 {
		kc := cfg.controllerKubeconfig
		if kc == "" {
			kc = cfg.kubeconfig
		}
		cc, err := kubeClient(kc)
		if err != nil {
			log.Error("start", "err", err)
			helper.Stop()
			return 1
		}
		b := &bindingSatisfier{client: cc, driver: cfg.driverName, node: cfg.nodeName, delay: cfg.satisfyBindingConditions, fail: cfg.failBinding, log: log}
		go b.run(ctx)
	}
	switch err := publish(ctx, cfg, helper); {
	case err != nil && ctx.Err() == nil:
		log.Error("publish", "err", err)
		helper.Stop()
		return 1
	case err == nil && cfg.publish:
		log.Info("publishing", "pool", cfg.nodeName)
	}

	<-ctx.Done()
	helper.Stop()
	if cause := context.Cause(ctx); errors.As(cause, new(fatalError)) {
		log.Error("stopped", "err", cause)
		return 1
	}
	log.Info("stopped")
	return 0
}

// start creates the directories the library expects to exist and starts
// the library's DRA and registration gRPC servers, in that order.
func start(ctx context.Context, cfg config, d *driver, client kubernetes.Interface) (*kubeletplugin.Helper, error) {
	for _, dir := range []string{cfg.registrarDir, cfg.pluginDataDir(), cfg.cdiRoot} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	helper, err := kubeletplugin.Start(ctx, d, cfg.pluginOptions(client)...)
	if err != nil {
		return nil, fmt.Errorf("kubeletplugin.Start: %w", err)
	}
	return helper, nil
}

// publish hands the GPUs to the library's ResourceSlice controller. The
// first call blocks until the controller's informer has synced (a list or
// watch of this node's slices answered), or ctx ends.
func publish(ctx context.Context, cfg config, helper *kubeletplugin.Helper) error {
	if !cfg.publish {
		return nil
	}
	return helper.PublishResources(ctx, cfg.inventory().resources(cfg.nodeName))
}

// kubeClient builds a clientset from --kubeconfig (in-cluster config when
// empty).
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "upstreamdriver"
	return kubernetes.NewForConfig(rc)
}
