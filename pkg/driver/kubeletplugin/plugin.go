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
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
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
	// DefaultResyncPeriod is how often, with APIKubelet, the published
	// ResourceSlices are compared with the model and repaired.
	DefaultResyncPeriod = time.Minute
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

// API is the DRA node API a plugin serves to the node agent (or kubelet).
type API string

const (
	// APIAllot is allot's DRA node API (api/dra/v1alpha1), the default: the
	// SDK streams the model to allot's node agent, which publishes it as
	// the node's NodeResourceSlice, and prepare calls carry the
	// allocation, so the driver needs no API credentials. Any model the
	// partitionable form can express is served.
	APIAllot API = "allot"
	// APIKubelet is the kubelet's DRA API (k8s.io/kubelet/pkg/apis/dra v1
	// and v1beta1), which allot's node agent and Kubernetes' kubelet both
	// speak: the SDK publishes the model as resource.k8s.io/v1
	// ResourceSlices of Options.NodeName itself and, for each claim to
	// prepare, reads the resource.k8s.io/v1 ResourceClaim, both through
	// Options.KubeClient. Driver.Prepare gets the same Claim as with
	// APIAllot. v1 devices cannot express partitions: a model with
	// partition groups is refused.
	APIKubelet API = "kubelet"
)

// Options configure Start.
type Options struct {
	// DriverName is the driver's name, a DNS subdomain such as
	// gpu.example.com. Required.
	DriverName string
	// API is the DRA API the plugin serves: APIAllot (the default when
	// empty) or APIKubelet.
	API API
	// NodeName is the node the plugin runs on. Required with APIKubelet:
	// it is the pool name and spec.nodeName of the published
	// ResourceSlices, whose owner is this Node, and it picks the
	// node-local devices of a claim's allocation.
	NodeName string
	// KubeClient reads claims and the Node and writes ResourceSlices.
	// Required with APIKubelet, unused with APIAllot. A client-go
	// kubernetes.Interface satisfies it; NewKubeClient builds a smaller
	// one from a rest.Config. On allot, give it a node-driver token
	// (`allot token create --role node-driver --name DRIVER@NODE`).
	KubeClient KubeClient
	// ResyncPeriod is how often, with APIKubelet, the published
	// ResourceSlices are read back and repaired when they differ from the
	// model. Default DefaultResyncPeriod.
	ResyncPeriod time.Duration
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
	// slices publishes the model as v1 ResourceSlices (APIKubelet only).
	slices *slicePublisher
	// cancel ends background work (the slice publisher).
	cancel context.CancelFunc

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
// removed first. With APIKubelet it also starts publishing the model as
// ResourceSlices, in the background: failures are logged and retried. The
// plugin stops when ctx is done or Stop is called.
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
	if opts.API == APIKubelet {
		p.slices = newSlicePublisher(opts, p.log)
	}
	if err := p.PublishResources(ctx); err != nil {
		return nil, fmt.Errorf("start kubelet plugin %s: %w", opts.DriverName, err)
	}
	if err := p.serve(); err != nil {
		return nil, fmt.Errorf("start kubelet plugin %s: %w", opts.DriverName, err)
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	if p.slices != nil {
		go p.slices.run(bg)
	}
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.stopped:
		}
	}()
	p.log.Info("kubelet plugin started", "api", opts.API, "draSocket", p.draSock, "registrationSocket", p.regSock)
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
	switch o.API {
	case "":
		o.API = APIAllot
	case APIAllot:
	case APIKubelet:
		if o.NodeName == "" {
			return o, errors.New("options.NodeName: required with APIKubelet")
		}
		if msgs := utilvalidation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
			return o, fmt.Errorf("options.NodeName %q: must be a DNS subdomain: %s", o.NodeName, strings.Join(msgs, "; "))
		}
		if o.KubeClient == nil {
			return o, errors.New("options.KubeClient: required with APIKubelet (the plugin reads claims and writes ResourceSlices)")
		}
	default:
		return o, fmt.Errorf("options.API %q: must be %q or %q", o.API, APIAllot, APIKubelet)
	}
	switch {
	case o.ResyncPeriod < 0:
		return o, fmt.Errorf("options.ResyncPeriod %s: must not be negative", o.ResyncPeriod)
	case o.ResyncPeriod == 0:
		o.ResyncPeriod = DefaultResyncPeriod
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
	switch p.opts.API {
	case APIKubelet:
		srv := &kubeletServer{p: p}
		drapbv1.RegisterDRAPluginServer(p.dra, srv)
		drapbv1beta1.RegisterDRAPluginServer(p.dra, drapbv1beta1.V1ServerWrapper{DRAPluginServer: srv})
	default:
		drapb.RegisterNodeServer(p.dra, &nodeServer{p: p})
	}
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
// DRA socket. With APIKubelet it stops publishing but leaves the
// ResourceSlices: the node agent (or kubelet) removes them when the driver
// does not register again within its grace period, so a restart does not
// empty the node's inventory. It is idempotent and returns when the
// plugin has stopped.
func (p *Plugin) Stop() {
	p.stopOnce.Do(func() {
		close(p.stopped)
		if p.cancel != nil {
			p.cancel()
		}
		if p.slices != nil {
			p.slices.wait()
		}
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
