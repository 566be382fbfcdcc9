package dra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// Registration errors, sent to the plugin in NotifyRegistrationStatus.
var (
	ErrUnsupportedType    = errors.New("unsupported plugin type")
	ErrInvalidDriverName  = errors.New("invalid driver name")
	ErrUnsupportedVersion = errors.New("unsupported DRA API version")
	ErrInvalidEndpoint    = errors.New("invalid endpoint")
)

// validateInfo checks a plugin's GetInfo answer.
func validateInfo(info *registerapi.PluginInfo) error {
	if info.GetType() != drapb.PluginType {
		return fmt.Errorf("%w: type %q (this node agent serves only %q)", ErrUnsupportedType, info.GetType(), drapb.PluginType)
	}
	if errs := validation.IsDNS1123Subdomain(info.GetName()); len(errs) > 0 {
		return fmt.Errorf("%w: name %q: %s", ErrInvalidDriverName, info.GetName(), strings.Join(errs, "; "))
	}
	if !slices.Contains(info.GetSupportedVersions(), drapb.Version) {
		return fmt.Errorf("%w: supported versions %q do not include %q", ErrUnsupportedVersion, info.GetSupportedVersions(), drapb.Version)
	}
	ep := info.GetEndpoint()
	if ep == "" || !filepath.IsAbs(ep) || filepath.Clean(ep) != ep {
		return fmt.Errorf("%w: endpoint %q must be the clean absolute path of the DRA socket", ErrInvalidEndpoint, ep)
	}
	return nil
}

// watchRegistry starts watching the registry directory. Sockets already
// there are registered by runRegistry.
func (m *Manager) watchRegistry() (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch plugins registry: %w", err)
	}
	if err := w.Add(m.opts.RegistryDir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch plugins registry %s: %w", m.opts.RegistryDir, err)
	}
	return w, nil
}

// runRegistry registers the sockets present at start, then follows the
// directory's changes until ctx ends: a new socket is a registration, a
// removed one the end of its driver.
func (m *Manager) runRegistry(ctx context.Context, w *fsnotify.Watcher) {
	defer w.Close()
	entries, err := os.ReadDir(m.opts.RegistryDir)
	if err != nil {
		m.log.Warn("DRA manager: read plugins registry", "err", err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSocket != 0 {
			path := filepath.Join(m.opts.RegistryDir, e.Name())
			m.goRun(func() { m.handleSocket(ctx, path) })
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			m.log.Warn("DRA manager: plugins registry watch", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			m.onRegistryEvent(ctx, ev)
		}
	}
}

func (m *Manager) onRegistryEvent(ctx context.Context, ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create):
		fi, err := os.Lstat(ev.Name)
		if err != nil || fi.Mode()&fs.ModeSocket == 0 {
			return
		}
		m.goRun(func() { m.handleSocket(ctx, ev.Name) })
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		if d := m.drivers.byRegSocket(ev.Name); d != nil {
			m.unregisterDriver(d, "its registration socket was removed")
		}
	}
}

// handleSocket runs one registration: GetInfo, validation, registration,
// NotifyRegistrationStatus. A plugin that does not answer is logged.
func (m *Manager) handleSocket(ctx context.Context, path string) {
	conn, err := newConn(path)
	if err != nil {
		m.log.Warn("DRA manager: dial registration socket", "socket", path, "err", err)
		return
	}
	defer conn.Close()
	rc := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, m.opts.RPCTimeout)
	defer cancel()
	info, err := rc.GetInfo(cctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		m.metrics.errors.WithLabelValues("", opRegister).Inc()
		m.log.Warn("DRA manager: GetInfo", "socket", path, "err", err)
		return
	}
	regErr := validateInfo(info)
	if regErr == nil {
		regErr = m.registerDriver(ctx, info.Name, info.Endpoint, path)
	}
	status := &registerapi.RegistrationStatus{PluginRegistered: regErr == nil}
	if regErr != nil {
		status.Error = regErr.Error()
		m.metrics.errors.WithLabelValues(driverLabel(info.GetName(), regErr), opRegister).Inc()
		m.log.Warn("DRA manager: registration refused", "socket", path, "driver", info.GetName(), "err", regErr)
	}
	if _, err := rc.NotifyRegistrationStatus(cctx, status); err != nil {
		m.log.Warn("DRA manager: NotifyRegistrationStatus", "socket", path, "driver", info.GetName(), "err", err)
	}
}

// driverLabel is the metrics label of a registration's driver: empty when
// its name is invalid, so bad input cannot create series at will.
func driverLabel(name string, err error) string {
	if errors.Is(err, ErrInvalidDriverName) || errors.Is(err, ErrUnsupportedType) {
		return ""
	}
	return name
}
