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
	"syscall"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
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

// registration is what a plugin's GetInfo answer says of its driver.
type registration struct {
	name string
	// service is the DRA API the Manager calls: drapb.Version (allot's),
	// drapbv1.DRAPluginService or drapbv1beta1.DRAPluginService.
	service string
	// health is the health service to watch (drahealthv1's or
	// drahealthv1alpha1's), empty when the driver offers none. allot
	// drivers report health in their resource stream instead.
	health string
}

// validateInfo checks a plugin's GetInfo answer and picks the services to
// use. A plugin that offers allot's v1alpha1 is an allot driver, whatever
// else it offers (so one binary can offer both: a Kubernetes kubelet
// ignores v1alpha1). Otherwise the kubelet's v1 is preferred to its
// v1beta1, whatever the order they are listed in, and likewise for the
// health service.
func validateInfo(info *registerapi.PluginInfo) (registration, error) {
	reg := registration{name: info.GetName()}
	if info.GetType() != drapb.PluginType {
		return reg, fmt.Errorf("%w: type %q (this node agent serves only %q)", ErrUnsupportedType, info.GetType(), drapb.PluginType)
	}
	if errs := validation.IsDNS1123Subdomain(info.GetName()); len(errs) > 0 {
		return reg, fmt.Errorf("%w: name %q: %s", ErrInvalidDriverName, info.GetName(), strings.Join(errs, "; "))
	}
	offered := info.GetSupportedVersions()
	for _, s := range []string{drapb.Version, drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService} {
		if slices.Contains(offered, s) {
			reg.service = s
			break
		}
	}
	if reg.service == "" {
		return reg, fmt.Errorf("%w: supported versions %q include none of %q, %q and %q", ErrUnsupportedVersion,
			offered, drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService, drapb.Version)
	}
	if reg.service != drapb.Version {
		for _, s := range []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService} {
			if slices.Contains(offered, s) {
				reg.health = s
				break
			}
		}
	}
	ep := info.GetEndpoint()
	if ep == "" || !filepath.IsAbs(ep) || filepath.Clean(ep) != ep {
		return reg, fmt.Errorf("%w: endpoint %q must be the clean absolute path of the DRA socket", ErrInvalidEndpoint, ep)
	}
	return reg, nil
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
//
// A socket created while the manager starts is both in the first listing
// and in a Create event; it registers once. Every registration gets the
// sequence number of the moment its socket was seen, so that when two
// sockets of one driver register concurrently the later one wins whatever
// order their calls finish in.
func (m *Manager) runRegistry(ctx context.Context, w *fsnotify.Watcher) {
	defer w.Close()
	r := registryState{seen: map[string]socketID{}}
	entries, err := os.ReadDir(m.opts.RegistryDir)
	if err != nil {
		m.log.Warn("DRA manager: read plugins registry", "err", err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSocket != 0 {
			m.onSocket(ctx, &r, filepath.Join(m.opts.RegistryDir, e.Name()))
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
			m.onRegistryEvent(ctx, &r, ev)
		}
	}
}

// registryState is what runRegistry's goroutine, and only it, knows of the
// registry directory.
type registryState struct {
	seen map[string]socketID // the sockets registered, by path
	seq  uint64              // the sequence number of the last socket seen
}

// socketID tells a socket file from another one later created at the same
// path.
type socketID struct{ dev, ino uint64 }

func (m *Manager) onRegistryEvent(ctx context.Context, r *registryState, ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create):
		m.onSocket(ctx, r, ev.Name)
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		delete(r.seen, ev.Name)
		if d := m.drivers.byRegSocket(ev.Name); d != nil {
			m.unregisterDriver(d, "its registration socket was removed")
		}
	}
}

// onSocket starts the registration of the socket at path unless it is not
// a socket or was already registered.
func (m *Manager) onSocket(ctx context.Context, r *registryState, path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 {
		return
	}
	var id socketID
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id = socketID{dev: uint64(st.Dev), ino: st.Ino}
	}
	if prev, ok := r.seen[path]; ok && prev == id {
		return
	}
	r.seen[path] = id
	r.seq++
	seq := r.seq
	m.goRun(func() { m.handleSocket(ctx, path, seq) })
}

// handleSocket runs one registration: GetInfo, validation, registration,
// NotifyRegistrationStatus. A plugin that does not answer is logged. seq
// orders the registration among those of its driver.
func (m *Manager) handleSocket(ctx context.Context, path string, seq uint64) {
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
	reg, regErr := validateInfo(info)
	if regErr == nil {
		regErr = m.registerDriver(ctx, reg, info.Endpoint, path, seq)
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
