// Package dratest runs a DRA driver's kubelet plugin for tests of the node
// agent's DRA manager: a real gRPC server of allot's DRA node API
// (api/dra/v1alpha1) and of the plugin registration API on real unix
// sockets, whose answers tests script. It is a test helper package, in the
// spirit of net/http/httptest; no production code imports it. It does not
// use the driver SDK: the manager and the SDK meet only at the protocols.
package dratest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// Options describe a Plugin.
type Options struct {
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
	// Info adjusts the GetInfo answer (tests of registration
	// validation).
	Info func(*registerapi.PluginInfo)
	// Model is the first resource model streamed (JSON); nil streams
	// nothing until SetModel.
	Model []byte
	// NoResources answers NodeListAndWatchResources with Unimplemented, as
	// a control-plane driver may.
	NoResources bool
}

// PrepareFunc answers a NodePrepareResources call.
type PrepareFunc func(*drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error)

// UnprepareFunc answers a NodeUnprepareResources call.
type UnprepareFunc func(*drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error)

// Plugin is a running test plugin. Its methods are safe for concurrent
// use.
type Plugin struct {
	drapb.UnimplementedNodeServer
	registration

	opts Options
	// DRAPath is the DRA socket's path.
	DRAPath string

	mu         sync.Mutex
	model      []byte
	changed    chan struct{} // closed and replaced when the model changes
	prepare    PrepareFunc
	unprepare  UnprepareFunc
	prepared   [][]*drapb.Claim
	unprepared [][]*drapb.Claim
	draServer  *grpc.Server
}

// Start serves the DRA socket, then the registration socket (whose
// appearance makes the manager register the plugin). Both stop at the end
// of the test.
func Start(t testing.TB, opts Options) *Plugin {
	t.Helper()
	if opts.SocketDir == "" {
		opts.SocketDir = ShortTempDir(t)
	}
	if opts.RegSocket == "" {
		opts.RegSocket = opts.Name + "-reg.sock"
	}
	p := &Plugin{opts: opts, model: opts.Model, changed: make(chan struct{}), DRAPath: filepath.Join(opts.SocketDir, "dra.sock")}
	p.registration = registration{t: t, regPath: filepath.Join(opts.RegistryDir, opts.RegSocket),
		statuses: make(chan *registerapi.RegistrationStatus, 16), info: p.info}
	p.draServer = serve(t, p.DRAPath, func(s *grpc.Server) { drapb.RegisterNodeServer(s, p) })
	p.Register()
	t.Cleanup(p.Stop)
	return p
}

// ShortTempDir returns a new temporary directory removed at the end of the
// test: short enough for unix socket paths, unlike t.TempDir.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// serve serves a gRPC server on a new unix socket at path.
func serve(t testing.TB, path string, register func(*grpc.Server)) *grpc.Server {
	t.Helper()
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	return s
}

// registration is a plugin's registration socket and the answers the
// manager got and gave there.
type registration struct {
	registerapi.UnimplementedRegistrationServer

	t        testing.TB
	regPath  string
	info     func() *registerapi.PluginInfo
	statuses chan *registerapi.RegistrationStatus

	mu        sync.Mutex
	regServer *grpc.Server
}

// RegPath is the registration socket's path.
func (r *registration) RegPath() string { return r.regPath }

// Register (re)creates the registration socket.
func (r *registration) Register() {
	r.t.Helper()
	s := serve(r.t, r.regPath, func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, r) })
	r.mu.Lock()
	r.regServer = s
	r.mu.Unlock()
}

// Unregister stops the registration server and removes its socket, as a
// plugin that exits does; the DRA socket keeps serving.
func (r *registration) Unregister() {
	r.mu.Lock()
	s := r.regServer
	r.regServer = nil
	r.mu.Unlock()
	if s != nil {
		s.Stop() // removes the socket file
	}
	_ = os.Remove(r.regPath)
}

// Status waits for the manager's NotifyRegistrationStatus.
func (r *registration) Status(t testing.TB) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case st := <-r.statuses:
		return st
	case <-time.After(60 * time.Second): // a deadline for a loaded machine, not a speed check
		t.Fatalf("plugin %s: no NotifyRegistrationStatus within 60s", r.regPath)
		return nil
	}
}

// GetInfo answers the registration's first question.
func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info(), nil
}

// NotifyRegistrationStatus records the manager's verdict.
func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	select {
	case r.statuses <- st:
	default:
		r.t.Errorf("plugin %s: too many registration statuses", r.regPath)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// StopDRA stops the DRA server and removes its socket: streams break and
// calls fail.
func (p *Plugin) StopDRA() {
	p.draServer.Stop()
	_ = os.Remove(p.DRAPath)
}

// Stop stops both servers.
func (p *Plugin) Stop() {
	p.Unregister()
	p.StopDRA()
}

// SetModel streams a new resource model (JSON).
func (p *Plugin) SetModel(model []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.model = model
	close(p.changed)
	p.changed = make(chan struct{})
}

// OnPrepare replaces the NodePrepareResources behaviour; nil restores the
// default (every claim prepared, CDI device example.com/dra=CLAIM-NAME).
func (p *Plugin) OnPrepare(f PrepareFunc) { p.mu.Lock(); p.prepare = f; p.mu.Unlock() }

// OnUnprepare replaces the NodeUnprepareResources behaviour; nil restores
// the default (success for every claim).
func (p *Plugin) OnUnprepare(f UnprepareFunc) { p.mu.Lock(); p.unprepare = f; p.mu.Unlock() }

// Prepared returns the claims of every NodePrepareResources call so far.
func (p *Plugin) Prepared() [][]*drapb.Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.prepared)
}

// Unprepared returns the claims of every NodeUnprepareResources call so
// far.
func (p *Plugin) Unprepared() [][]*drapb.Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.unprepared)
}

// DeviceFor is the CDI device the default prepare answers for a claim.
func DeviceFor(claimName string) string { return "example.com/dra=" + claimName }

func (p *Plugin) info() *registerapi.PluginInfo {
	info := &registerapi.PluginInfo{Type: drapb.PluginType, Name: p.opts.Name, Endpoint: p.DRAPath,
		SupportedVersions: []string{drapb.Version}}
	if p.opts.Info != nil {
		p.opts.Info(info)
	}
	return info
}

// NodeListAndWatchResources streams the model, then every change.
func (p *Plugin) NodeListAndWatchResources(_ *drapb.NodeListAndWatchResourcesRequest, stream grpc.ServerStreamingServer[drapb.NodeListAndWatchResourcesResponse]) error {
	if p.opts.NoResources {
		return status.Error(codes.Unimplemented, "no resources published")
	}
	for {
		p.mu.Lock()
		model, changed := p.model, p.changed
		p.mu.Unlock()
		if model != nil {
			if err := stream.Send(&drapb.NodeListAndWatchResourcesResponse{ResourceModel: model}); err != nil {
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

// NodePrepareResources records the call and answers it.
func (p *Plugin) NodePrepareResources(_ context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	p.mu.Lock()
	p.prepared = append(p.prepared, req.GetClaims())
	f := p.prepare
	p.mu.Unlock()
	if f != nil {
		return f(req)
	}
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{CdiDevices: []string{DeviceFor(c.GetName())}}
	}
	return resp, nil
}

// NodeUnprepareResources records the call and answers it.
func (p *Plugin) NodeUnprepareResources(_ context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	p.mu.Lock()
	p.unprepared = append(p.unprepared, req.GetClaims())
	f := p.unprepare
	p.mu.Unlock()
	if f != nil {
		return f(req)
	}
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		resp.Claims[c.GetUid()] = &drapb.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

// PrepareError answers every claim of a call with an error and a gRPC
// code (codes.OK for none).
func PrepareError(msg string, code codes.Code) PrepareFunc {
	return func(req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
		resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
		for _, c := range req.GetClaims() {
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: fmt.Sprintf("%s (claim %s)", msg, c.GetName()), ErrorCode: uint32(code)}
		}
		return resp, nil
	}
}
