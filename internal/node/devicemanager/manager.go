package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"allot.dev/allot/internal/node/pods"
)

// Defaults for Options.
const (
	DefaultDir         = "/var/lib/kubelet/device-plugins"
	DefaultGracePeriod = 5 * time.Minute // the kubelet's endpointStopGracePeriod
	DefaultRPCTimeout  = 30 * time.Second
	// KubeletSocket is the registration socket's name inside Dir.
	KubeletSocket = "kubelet.sock"
)

// Options configure a Manager. Zero values take defaults.
type Options struct {
	// Dir holds kubelet.sock and the plugins' sockets.
	Dir string
	// CheckpointDir holds the checkpoint; empty is Dir.
	CheckpointDir string
	// GracePeriod is how long a plugin that went away keeps its resource
	// in capacity (with every device unhealthy) before it is removed.
	GracePeriod time.Duration
	// RPCTimeout bounds every call to a plugin (and the dial).
	RPCTimeout time.Duration
	// OnChange is called after capacity, allocatable or device health
	// changed. It runs outside the Manager's locks and must not block.
	OnChange func()
	// Wake asks for a sync of the pod with this UID; it is called for
	// every pod holding devices of a resource whose devices changed (their
	// health in the pod's status, and PodFailure, may have changed). It
	// runs outside the Manager's locks and must not block; nil does
	// nothing.
	Wake   func(podUID types.UID)
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.CheckpointDir == "" {
		o.CheckpointDir = o.Dir
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	if o.RPCTimeout <= 0 {
		o.RPCTimeout = DefaultRPCTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnChange == nil {
		o.OnChange = func() {}
	}
	if o.Wake == nil {
		o.Wake = func(types.UID) {}
	}
}

// Manager is the node's device manager. Its methods are safe for
// concurrent use.
type Manager struct {
	pluginapi.UnimplementedRegistrationServer

	opts    Options
	log     *slog.Logger
	metrics *metrics

	// devices owns the registered resources, their endpoints and devices.
	devices *registry
	// allocs owns the pod → container → resource → devices records; admitMu
	// serialises the decisions that read devices and write allocs.
	admitMu sync.Mutex
	allocs  *allocations

	srvMu  sync.Mutex
	server *grpc.Server

	changeMu sync.Mutex
}

var (
	_ pods.Admitter            = (*Manager)(nil)
	_ pods.Releaser            = (*Manager)(nil)
	_ pods.ContainerConfigurer = (*Manager)(nil)
	_ pods.HealthReporter      = (*Manager)(nil)
	_ pods.Monitor             = (*Manager)(nil)
)

// New returns a Manager with the checkpoint's allocations restored. The
// resources named in the checkpoint are known but have no devices until
// their plugins register again.
func New(opts Options) (*Manager, error) {
	opts.defaults()
	m := &Manager{opts: opts, log: opts.Logger, metrics: newMetrics()}
	m.devices = newRegistry(opts.GracePeriod, m.changed)
	m.allocs = newAllocations()
	cp, err := readCheckpoint(m.checkpointPath())
	if err != nil {
		return nil, err
	}
	if err := m.allocs.restore(cp.Allocations); err != nil {
		return nil, err
	}
	m.devices.restore(cp.Resources)
	return m, nil
}

// Start removes stale sockets from Dir, (re)creates kubelet.sock and
// serves registrations until ctx ends or Stop is called.
func (m *Manager) Start(ctx context.Context) error {
	if err := os.MkdirAll(m.opts.Dir, 0o750); err != nil {
		return fmt.Errorf("create plugin dir: %w", err)
	}
	sock := filepath.Join(m.opts.Dir, KubeletSocket)
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("%s is served by another node agent on this host (another allot up or kubelet?); "+
			"give this one its own directory with --device-plugin-dir, or an empty one to run without device plugins", sock)
	}
	if err := removeSockets(m.opts.Dir); err != nil {
		return err
	}
	lis, err := net.Listen("unix", filepath.Join(m.opts.Dir, KubeletSocket))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", KubeletSocket, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, m)
	m.srvMu.Lock()
	m.server = srv
	m.srvMu.Unlock()
	m.devices.startGrace() // resources from the checkpoint expire too
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			m.log.Error("device manager: registration server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		m.Stop()
	}()
	return nil
}

// Stop stops the registration server and disconnects every plugin. The
// checkpoint stays for the next Manager.
func (m *Manager) Stop() {
	m.srvMu.Lock()
	srv := m.server
	m.server = nil
	m.srvMu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	m.devices.stopAll()
}

// removeSockets removes the sockets in dir, like the kubelet does at
// start: plugins see kubelet.sock re-created and register again. Other
// files are left alone.
func removeSockets(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read plugin dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale socket: %w", err))
		}
	}
	return errors.Join(errs...)
}

// changed updates the gauges, tells the caller, and wakes the pods
// holding devices of res. changeMu orders the gauge updates so that the
// last snapshot taken is the last one set.
func (m *Manager) changed(res string) {
	m.changeMu.Lock()
	m.metrics.setResources(m.devices.snapshot())
	m.changeMu.Unlock()
	m.opts.OnChange()
	for _, uid := range m.allocs.podsHolding(res) {
		m.opts.Wake(types.UID(uid))
	}
}
