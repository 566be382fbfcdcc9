package kubeletplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/driver/internal/keylock"
)

// Defaults of Options.
const (
	// DefaultMaxConcurrentClaims bounds how many claims of one request run
	// at once.
	DefaultMaxConcurrentClaims = 8
	// DefaultStopGracePeriod is how long Stop waits for calls in flight.
	DefaultStopGracePeriod = 10 * time.Second
	// DRASocketName is the DRA socket's name in Options.PluginDir.
	DRASocketName = "dra.sock"
	// maxSocketPath is the longest unix socket path Linux accepts.
	maxSocketPath = 107
)

// Driver is the device logic of a DRA driver. Its methods are called
// concurrently, but never concurrently for the same claim UID.
type Driver interface {
	// Enumerate returns the node's resources. Exactly one model field
	// is set (today: Partitionable).
	Enumerate(ctx context.Context) (resourcev1alpha2.NodeResourceModel, error)
	// Prepare makes the claim's resources usable and returns the fully
	// qualified CDI device names (vendor.com/class=name) that every
	// container using the claim gets. It is idempotent: a claim already
	// prepared returns the same names. Wrap ErrNotFound when an allocated
	// instance does not exist (any more).
	Prepare(ctx context.Context, claim Claim) (cdiDevices []string, err error)
	// Unprepare undoes Prepare. It is idempotent: a claim that is not
	// prepared is a success.
	Unprepare(ctx context.Context, claim Claim) error
}

// Options configure Start.
type Options struct {
	// DriverName is the driver's name, a DNS subdomain such as
	// gpu.example.com. Required.
	DriverName string
	// PluginsRegistryDir is where the registration socket goes, the
	// directory the node agent watches. Default
	// v1alpha1.DefaultPluginsRegistryDir.
	PluginsRegistryDir string
	// PluginDir is the driver's own directory, holding the DRA socket
	// (PluginDir/dra.sock). Default v1alpha1.DefaultPluginsDir/DRIVER.
	PluginDir string
	// Logger receives the plugin's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxConcurrentClaims bounds how many claims of one prepare or
	// unprepare request run at once. Default DefaultMaxConcurrentClaims.
	MaxConcurrentClaims int
	// StopGracePeriod is how long Stop lets calls in flight finish before
	// it closes their connections. Default DefaultStopGracePeriod.
	StopGracePeriod time.Duration
}

// Plugin is a running kubelet plugin: the DRA server and the registration
// server of one driver.
type Plugin struct {
	driver  Driver
	opts    Options
	log     *slog.Logger
	regSock string
	draSock string
	reg     *grpc.Server
	dra     *grpc.Server
	locks   keylock.Locks

	// publishMu serializes PublishResources, so models are stored in the
	// order they were enumerated.
	publishMu sync.Mutex

	mu      sync.Mutex
	model   []byte        // JSON of the current model
	changed chan struct{} // closed and replaced when model changes
	regErr  error         // the last NotifyRegistrationStatus
	regOK   bool

	stopOnce sync.Once
	stopped  chan struct{} // closed by Stop: streams end
	done     chan struct{} // closed when Stop has finished
}

// Start enumerates the driver's resources, serves the DRA node API and the
// registration service, and returns. Stale sockets at both paths are
// removed first. The plugin stops when ctx is done or Stop is called.
func Start(ctx context.Context, d Driver, opts Options) (*Plugin, error) {
	if d == nil {
		return nil, errors.New("start kubelet plugin: driver is nil")
	}
	opts, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	p := &Plugin{
		driver:  d,
		opts:    opts,
		log:     opts.Logger.With("driver", opts.DriverName),
		regSock: filepath.Join(opts.PluginsRegistryDir, opts.DriverName+"-reg.sock"),
		draSock: filepath.Join(opts.PluginDir, DRASocketName),
		changed: make(chan struct{}),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if err := p.PublishResources(ctx); err != nil {
		return nil, fmt.Errorf("start kubelet plugin %s: %w", opts.DriverName, err)
	}
	if err := p.serve(); err != nil {
		return nil, fmt.Errorf("start kubelet plugin %s: %w", opts.DriverName, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.stopped:
		}
	}()
	p.log.Info("kubelet plugin started", "draSocket", p.draSock, "registrationSocket", p.regSock)
	return p, nil
}

// complete validates o and fills defaults.
func (o Options) complete() (Options, error) {
	if o.DriverName == "" {
		return o, errors.New("options.DriverName: required")
	}
	if msgs := utilvalidation.IsDNS1123Subdomain(o.DriverName); len(msgs) > 0 {
		return o, fmt.Errorf("options.DriverName %q: must be a DNS subdomain: %s", o.DriverName, strings.Join(msgs, "; "))
	}
	if o.PluginsRegistryDir == "" {
		o.PluginsRegistryDir = drapb.DefaultPluginsRegistryDir
	}
	if o.PluginDir == "" {
		o.PluginDir = filepath.Join(drapb.DefaultPluginsDir, o.DriverName)
	}
	// The node agent accepts only a clean absolute endpoint.
	for _, dir := range []*string{&o.PluginsRegistryDir, &o.PluginDir} {
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return o, fmt.Errorf("make %s absolute: %w", *dir, err)
		}
		*dir = abs
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.MaxConcurrentClaims < 0:
		return o, fmt.Errorf("options.MaxConcurrentClaims %d: must not be negative", o.MaxConcurrentClaims)
	case o.MaxConcurrentClaims == 0:
		o.MaxConcurrentClaims = DefaultMaxConcurrentClaims
	}
	switch {
	case o.StopGracePeriod < 0:
		return o, fmt.Errorf("options.StopGracePeriod %s: must not be negative", o.StopGracePeriod)
	case o.StopGracePeriod == 0:
		o.StopGracePeriod = DefaultStopGracePeriod
	}
	for field, path := range map[string]string{
		"options.PluginsRegistryDir": filepath.Join(o.PluginsRegistryDir, o.DriverName+"-reg.sock"),
		"options.PluginDir":          filepath.Join(o.PluginDir, DRASocketName),
	} {
		if len(path) > maxSocketPath {
			return o, fmt.Errorf("%s: socket path %s is %d bytes long, more than the %d a unix socket allows", field, path, len(path), maxSocketPath)
		}
	}
	return o, nil
}

// serve listens on both sockets, the DRA socket first so that the driver
// is reachable by the time the node agent sees the registration socket.
func (p *Plugin) serve() error {
	draLis, err := listen(p.draSock)
	if err != nil {
		return err
	}
	regLis, err := listen(p.regSock)
	if err != nil {
		draLis.Close()
		return err
	}
	p.dra = grpc.NewServer()
	drapb.RegisterNodeServer(p.dra, &nodeServer{p: p})
	p.reg = grpc.NewServer()
	registerapi.RegisterRegistrationServer(p.reg, &registrationServer{p: p})
	go p.run(p.dra, draLis, "DRA")
	go p.run(p.reg, regLis, "registration")
	return nil
}

// listen creates the socket's directory, removes a stale socket and
// listens on path.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return lis, nil
}

func (p *Plugin) run(s *grpc.Server, lis net.Listener, what string) {
	if err := s.Serve(lis); err != nil {
		p.log.Error("kubelet plugin server failed", "server", what, "err", err)
	}
}

// DRASocket is the path of the DRA socket.
func (p *Plugin) DRASocket() string { return p.draSock }

// RegistrationSocket is the path of the registration socket.
func (p *Plugin) RegistrationSocket() string { return p.regSock }

// RegistrationStatus reports what the node agent last said through
// NotifyRegistrationStatus: registered, or the reason it was not. Before
// the first notification it returns false and nil.
func (p *Plugin) RegistrationStatus() (registered bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regOK, p.regErr
}

// Stop removes the registration socket, ends the resource streams, lets
// calls in flight finish for up to Options.StopGracePeriod and removes the
// DRA socket. It is idempotent and returns when the plugin has stopped.
func (p *Plugin) Stop() {
	p.stopOnce.Do(func() {
		close(p.stopped)
		p.reg.Stop()
		removeSocket(p.regSock, p.log)
		graceful := make(chan struct{})
		go func() {
			p.dra.GracefulStop()
			close(graceful)
		}()
		t := time.NewTimer(p.opts.StopGracePeriod)
		select {
		case <-graceful:
			t.Stop()
		case <-t.C:
			p.log.Warn("kubelet plugin calls still running after the grace period; closing their connections", "gracePeriod", p.opts.StopGracePeriod)
			p.dra.Stop()
			<-graceful
		}
		removeSocket(p.draSock, p.log)
		p.log.Info("kubelet plugin stopped")
		close(p.done)
	})
	<-p.done
}

func removeSocket(path string, log *slog.Logger) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("remove socket", "path", path, "err", err)
	}
}
