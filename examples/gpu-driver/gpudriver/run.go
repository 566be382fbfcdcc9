package gpudriver

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/driver/kubeletplugin"
)

// Run serves the driver until ctx is done: it loads the model, starts the
// kubelet plugin, and republishes the model whenever the model file
// changes. It returns nil when ctx ends and an error when it cannot start.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.complete()
	if err != nil {
		return fmt.Errorf("%s: %w", DriverName, err)
	}
	// Watch before the first load, so that no change is missed.
	var watcher *fsnotify.Watcher
	if cfg.ModelFile != "" {
		if watcher, err = watchFile(cfg.ModelFile); err != nil {
			return err
		}
		defer watcher.Close()
	}
	inv, err := loadModel(cfg.ModelFile, cfg.Publish)
	if err != nil {
		return err
	}
	opts := kubeletplugin.Options{
		DriverName:         DriverName,
		PluginsRegistryDir: cfg.PluginsRegistryDir,
		PluginDir:          cfg.PluginDir,
		Logger:             cfg.Logger,
	}
	if cfg.Publish == PublishV1 {
		opts.API, opts.NodeName, opts.KubeClient = kubeletplugin.APIKubelet, cfg.NodeName, cfg.KubeClient
		if opts.KubeClient == nil {
			if opts.KubeClient, err = kubeClient(cfg.Kubeconfig); err != nil {
				return fmt.Errorf("%s: --publish=v1: %w", DriverName, err)
			}
		}
	}
	d := newDriver(cfg, inv)
	p, err := kubeletplugin.Start(ctx, d, opts)
	if err != nil {
		return err
	}
	defer p.Stop()
	if watcher == nil {
		<-ctx.Done()
		return nil
	}
	d.reloadOnChange(ctx, p, watcher)
	return nil
}

// kubeClient is the API access of --publish=v1, from a kubeconfig.
func kubeClient(kubeconfig string) (kubeletplugin.KubeClient, error) {
	rc, err := client.LoadRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = DriverName + "-kubelet-plugin"
	return kubeletplugin.NewKubeClient(rc)
}

// watchFile watches the directory of path: editors and config management
// replace files by renaming, which a watch on the file itself loses.
func watchFile(path string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch model file: %w", err)
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch model file: %w", err)
	}
	return w, nil
}

// reloadOnChange reloads the model when its file is written, created or
// renamed into place, and publishes it. A model that does not load is
// logged and the previous one stays.
func (d *driver) reloadOnChange(ctx context.Context, p *kubeletplugin.Plugin, w *fsnotify.Watcher) {
	name := filepath.Clean(d.cfg.ModelFile)
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-w.Errors:
			d.log.Warn("model file watch", "err", err)
		case ev := <-w.Events:
			if filepath.Clean(ev.Name) != name || !ev.Has(fsnotify.Write|fsnotify.Create) {
				continue
			}
			inv, err := loadModel(d.cfg.ModelFile, d.cfg.Publish)
			if err != nil {
				d.log.Error("model not reloaded; keeping the previous one", "err", err)
				continue
			}
			d.setInventory(inv)
			if err := p.PublishResources(ctx); err != nil {
				d.log.Error("publish reloaded model", "err", err)
				continue
			}
			d.log.Info("model reloaded", "file", d.cfg.ModelFile, "instances", len(inv.leaves))
		}
	}
}
