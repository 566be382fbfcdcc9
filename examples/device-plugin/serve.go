package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const kubeletSocket = "kubelet.sock"

// serveAndRegister serves the plugin and registers it, and does both
// again whenever kubelet.sock is re-created (the kubelet, or allot's
// agent, removed every socket and started anew). It returns when ctx
// ends.
func serveAndRegister(ctx context.Context, p *plugin, dir string, log *slog.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	for {
		srv, err := serve(p, dir)
		if err != nil {
			return err
		}
		err = registerUntilDone(ctx, p.cfg, dir, log)
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

// registerUntilDone registers, retrying every second while kubelet.sock
// is absent or refuses connections.
func registerUntilDone(ctx context.Context, cfg config, dir string, log *slog.Logger) error {
	for {
		err := register(ctx, cfg, dir)
		if err == nil {
			return nil
		}
		log.Warn("register", "err", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func register(ctx context.Context, cfg config, dir string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, kubeletSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: cfg.Socket, ResourceName: cfg.ResourceName,
		Options: &pluginapi.DevicePluginOptions{PreStartRequired: cfg.PreStartRequired, GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", cfg.ResourceName, err)
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
