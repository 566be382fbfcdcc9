package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// serveAndRegister serves the plugin and registers it, and does both
// again whenever kubelet.sock is re-created (the kubelet, or allot's
// agent, removed every socket and started anew). It returns when ctx
// ends.
func serveAndRegister(ctx context.Context, p *plugin, cfg *Config) error {
	log := cfg.Logger
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", cfg.Dir, err)
	}
	defer w.Close()
	if err := w.Add(cfg.Dir); err != nil {
		return fmt.Errorf("watch %s: %w", cfg.Dir, err)
	}
	for {
		// Serve only once the kubelet's socket exists: a kubelet (or
		// allot's device manager) clears its directory when it starts,
		// which would take a socket served earlier with it.
		if err := waitForKubelet(ctx, w, cfg); err != nil {
			return err
		}
		srv, err := serve(p, cfg.Dir)
		if err != nil {
			return err
		}
		err = registerUntilDone(ctx, p.cfg, cfg)
		if err == nil {
			log.Info("registered", "socket", p.cfg.Socket)
			err = waitForKubeletRestart(ctx, w)
		}
		srv.Stop()
		if err != nil {
			return err
		}
		log.Info("kubelet.sock re-created; registering again")
	}
}

// waitForKubelet returns once kubelet.sock exists, saying once that it
// waits; the directory events seen until then are consumed, so that only a
// later re-creation counts as a kubelet restart.
func waitForKubelet(ctx context.Context, w *fsnotify.Watcher, cfg *Config) error {
	path := filepath.Join(cfg.Dir, kubeletSocket)
	said := false
	for {
		drain(w)
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if !said {
			cfg.Logger.Info("waiting for the kubelet's registration socket", "socket", path)
			said = true
		}
		select {
		case <-w.Events:
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("directory watch closed")
			}
			return fmt.Errorf("watch plugin dir: %w", err)
		case <-time.After(cfg.RegisterRetry): // in case an event was missed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drain discards the directory events already queued.
func drain(w *fsnotify.Watcher) {
	for {
		select {
		case <-w.Events:
		default:
			return
		}
	}
}

func serve(p *plugin, dir string) (*grpc.Server, error) {
	path := filepath.Join(dir, p.cfg.Socket)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove old socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }() // ends with srv.Stop
	return srv, nil
}

// registerUntilDone registers, retrying every cfg.RegisterRetry while
// kubelet.sock is absent or refuses connections.
func registerUntilDone(ctx context.Context, devs deviceFile, cfg *Config) error {
	attempts := 0
	for {
		err := register(ctx, devs, cfg)
		if err == nil {
			return nil
		}
		// A kubelet that is (re)starting refuses for a moment: normal.
		// Anything else, or refusals that go on, is worth a warning.
		attempts++
		if status.Code(err) == codes.Unavailable && attempts < 10 {
			cfg.Logger.Info("register: the kubelet is not answering yet; retrying", "err", err)
		} else {
			cfg.Logger.Warn("register", "err", err, "attempts", attempts)
		}
		select {
		case <-time.After(cfg.RegisterRetry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func register(ctx context.Context, devs deviceFile, cfg *Config) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(cfg.Dir, kubeletSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.RegisterTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: devs.Socket, ResourceName: devs.ResourceName,
		Options: &pluginapi.DevicePluginOptions{PreStartRequired: devs.PreStartRequired, GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", devs.ResourceName, err)
	}
	return nil
}

// waitForKubeletRestart returns nil when kubelet.sock is created again.
func waitForKubeletRestart(ctx context.Context, w *fsnotify.Watcher) error {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("directory watch closed")
			}
			if filepath.Base(ev.Name) == kubeletSocket && ev.Has(fsnotify.Create) {
				return nil
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("directory watch closed")
			}
			return fmt.Errorf("watch plugin dir: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
