package dratest

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// KubeletOptions describe a KubeletPlugin.
type KubeletOptions struct {
	// Name is the driver's name. Required.
	Name string
	// RegistryDir is where the registration socket goes. Required.
	RegistryDir string
	// SocketDir is where the DRA socket goes; empty makes a temporary
	// directory.
	SocketDir string
	// RegSocket is the registration socket's file name (default
	// NAME-reg.sock).
	RegSocket string
	// Services are the services GetInfo offers, in order (default
	// v1.DRAPlugin, v1beta1.DRAPlugin, v1.DRAResourceHealth,
	// v1alpha1.DRAResourceHealth, as the upstream library offers them).
	// The plugin serves each it offers.
	Services []string
}

// KubeletPrepareFunc answers a kubelet API NodePrepareResources call.
type KubeletPrepareFunc func(*drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error)

// KubeletUnprepareFunc answers a kubelet API NodeUnprepareResources call.
type KubeletUnprepareFunc func(*drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error)

// KubeletPlugin is a running test plugin of the kubelet's DRA API
// (k8s.io/kubelet dra/v1 and v1beta1, dra-health v1 and v1alpha1), as a
// driver built on the upstream library serves it. Its methods are safe
// for concurrent use.
type KubeletPlugin struct {
	drapbv1.UnimplementedDRAPluginServer
	drahealthv1.UnimplementedDRAResourceHealthServer
	registration

	// DRAPath is the DRA socket's path.
	DRAPath string

	mu         sync.Mutex
	prepare    KubeletPrepareFunc
	unprepare  KubeletUnprepareFunc
	prepared   [][]*drapbv1.Claim
	unprepared [][]*drapbv1.Claim
	health     []*drahealthv1.DeviceHealth
	changed    chan struct{} // closed and replaced when health changes
	draServer  *grpc.Server
}

// StartKubelet serves the DRA socket, then the registration socket. Both
// stop at the end of the test.
func StartKubelet(t testing.TB, opts KubeletOptions) *KubeletPlugin {
	t.Helper()
	if opts.SocketDir == "" {
		opts.SocketDir = ShortTempDir(t)
	}
	if opts.RegSocket == "" {
		opts.RegSocket = opts.Name + "-reg.sock"
	}
	if opts.Services == nil {
		opts.Services = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService,
			drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService}
	}
	p := &KubeletPlugin{DRAPath: filepath.Join(opts.SocketDir, "dra.sock"), changed: make(chan struct{})}
	p.registration = registration{t: t, regPath: filepath.Join(opts.RegistryDir, opts.RegSocket),
		statuses: make(chan *registerapi.RegistrationStatus, 16), info: func() *registerapi.PluginInfo {
			return &registerapi.PluginInfo{Type: "DRAPlugin", Name: opts.Name, Endpoint: p.DRAPath, SupportedVersions: slices.Clone(opts.Services)}
		}}
	p.draServer = serve(t, p.DRAPath, func(s *grpc.Server) {
		for _, svc := range opts.Services {
			switch svc {
			case drapbv1.DRAPluginService:
				drapbv1.RegisterDRAPluginServer(s, p)
			case drapbv1beta1.DRAPluginService:
				drapbv1beta1.RegisterDRAPluginServer(s, drapbv1beta1.V1ServerWrapper{DRAPluginServer: p})
			case drahealthv1.DRAResourceHealthService:
				drahealthv1.RegisterDRAResourceHealthServer(s, p)
			case drahealthv1alpha1.DRAResourceHealthService:
				drahealthv1alpha1.RegisterDRAResourceHealthServer(s, drahealthv1.V1ServerWrapper{Server: p})
			}
		}
	})
	p.Register()
	t.Cleanup(p.Stop)
	return p
}

// Stop stops both servers and removes the registration socket.
func (p *KubeletPlugin) Stop() {
	p.Unregister()
	p.draServer.Stop()
}

// StopDRA stops the DRA server and leaves the registration socket, as a
// plugin killed with SIGKILL does.
func (p *KubeletPlugin) StopDRA() { p.draServer.Stop() }

// OnPrepare scripts the NodePrepareResources answers.
func (p *KubeletPlugin) OnPrepare(f KubeletPrepareFunc) { p.mu.Lock(); p.prepare = f; p.mu.Unlock() }

// OnUnprepare scripts the NodeUnprepareResources answers.
func (p *KubeletPlugin) OnUnprepare(f KubeletUnprepareFunc) {
	p.mu.Lock()
	p.unprepare = f
	p.mu.Unlock()
}

// Prepared returns the claims of every NodePrepareResources call so far.
func (p *KubeletPlugin) Prepared() [][]*drapbv1.Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.prepared)
}

// Unprepared returns the claims of every NodeUnprepareResources call so
// far.
func (p *KubeletPlugin) Unprepared() [][]*drapbv1.Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.unprepared)
}

// KubeletDeviceFor is the CDI device the default prepare answers for a
// claim.
func KubeletDeviceFor(claimName string) string { return "example.com/upstream=" + claimName }

// NodePrepareResources records the call and answers it: by default one
// device per claim, in pool "pool", serving every request.
func (p *KubeletPlugin) NodePrepareResources(_ context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	p.mu.Lock()
	p.prepared = append(p.prepared, req.GetClaims())
	f := p.prepare
	p.mu.Unlock()
	if f != nil {
		return f(req)
	}
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		resp.Claims[c.GetUid()] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{{
			PoolName: "pool", DeviceName: "dev-" + c.GetName(), CdiDeviceIds: []string{KubeletDeviceFor(c.GetName())}}}}
	}
	return resp, nil
}

// NodeUnprepareResources records the call and answers it.
func (p *KubeletPlugin) NodeUnprepareResources(_ context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	p.mu.Lock()
	p.unprepared = append(p.unprepared, req.GetClaims())
	f := p.unprepare
	p.mu.Unlock()
	if f != nil {
		return f(req)
	}
	resp := &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		resp.Claims[c.GetUid()] = &drapbv1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

// SetHealth sends devices' health on every open health stream, and to
// those opened later.
func (p *KubeletPlugin) SetHealth(devices ...*drahealthv1.DeviceHealth) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health = devices
	close(p.changed)
	p.changed = make(chan struct{})
}

// NodeWatchResources streams the health set, then every change.
func (p *KubeletPlugin) NodeWatchResources(_ *drahealthv1.NodeWatchResourcesRequest, stream grpc.ServerStreamingServer[drahealthv1.NodeWatchResourcesResponse]) error {
	for {
		p.mu.Lock()
		devices, changed := p.health, p.changed
		p.mu.Unlock()
		if devices != nil {
			if err := stream.Send(&drahealthv1.NodeWatchResourcesResponse{Devices: devices}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}
