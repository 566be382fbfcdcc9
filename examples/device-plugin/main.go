// Command device-plugin is an example Kubernetes device plugin
// (deviceplugin/v1beta1) with simulated devices, for trying allot's device
// manager (or a kubelet) without hardware. It serves on <dir>/<socket>,
// registers at <dir>/kubelet.sock, and registers again whenever
// kubelet.sock is re-created (the node agent restarted).
//
// Devices come from a YAML or JSON file (-config):
//
//	resourceName: example.com/gpu
//	socket: example-gpu.sock
//	preStartRequired: true
//	cdiKind: example.com/gpu
//	devices:
//	- {id: gpu-0, numa: 0, path: /dev/null, containerPath: /dev/gpu0}
//	- {id: gpu-1, numa: 1, path: /dev/null, containerPath: /dev/gpu1}
//
// Health: the control file (-control), polled, lists the IDs of unhealthy
// devices one per line (missing or empty: all healthy); SIGUSR1 flips the
// health of every device.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	var (
		cfgPath = flag.String("config", "device-plugin.yaml", "device configuration file (YAML or JSON)")
		dir     = flag.String("dir", "/var/lib/kubelet/device-plugins", "device plugin directory holding kubelet.sock")
		control = flag.String("control", "", "file listing unhealthy device IDs, polled (optional)")
		poll    = flag.Duration("poll", time.Second, "control file poll interval")
		cdiDir  = flag.String("cdi-dir", "/var/run/cdi", "where the CDI spec of the devices is written when cdiKind is set")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*cfgPath, *dir, *control, *cdiDir, *poll, log); err != nil {
		log.Error("device plugin failed", "err", err)
		os.Exit(1)
	}
}

func run(cfgPath, dir, control, cdiDir string, poll time.Duration, log *slog.Logger) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	if spec, err := writeCDISpec(&cfg, cdiDir); err != nil {
		return err
	} else if spec != "" {
		log.Info("wrote CDI spec", "path", spec)
		defer os.Remove(spec)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	p := newPlugin(cfg, log.With("resource", cfg.ResourceName))
	go toggleOnSIGUSR1(ctx, p)
	if control != "" {
		go pollControl(ctx, p, control, poll, log)
	}
	err = serveAndRegister(ctx, p, dir, log)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func toggleOnSIGUSR1(ctx context.Context, p *plugin) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	for {
		select {
		case <-ch:
			p.toggleAll()
		case <-ctx.Done():
			return
		}
	}
}

// pollControl applies the control file's unhealthy set when it changes
// (so a SIGUSR1 flip lasts until the file is edited).
func pollControl(ctx context.Context, p *plugin, path string, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last map[string]bool
	for {
		ids, err := readControl(path)
		if err != nil {
			log.Warn("read control file", "err", err)
		} else if last == nil || !mapsEqual(ids, last) {
			p.setUnhealthy(ids)
			last = ids
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

func readControl(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if id := strings.TrimSpace(line); id != "" && !strings.HasPrefix(id, "#") {
			ids[id] = true
		}
	}
	return ids, nil
}
