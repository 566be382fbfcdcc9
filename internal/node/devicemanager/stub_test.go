package devicemanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// stub is a real device plugin serving gRPC on a unix socket, whose
// behaviour tests swap through its function fields (set them before
// start, or under mu).
type stub struct {
	pluginapi.UnimplementedDevicePluginServer

	t        testing.TB
	dir      string
	endpoint string
	resource string
	opts     *pluginapi.DevicePluginOptions

	mu        sync.Mutex
	devs      []*pluginapi.Device
	changed   chan struct{} // closed and replaced on every device update
	allocate  func(context.Context, *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)
	preferred func(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error)
	preStarts [][]string
	allocs    [][]string

	server *grpc.Server
}

func newStub(t testing.TB, dir, endpoint, resource string, devs ...*pluginapi.Device) *stub {
	return &stub{t: t, dir: dir, endpoint: endpoint, resource: resource, devs: devs,
		changed: make(chan struct{}), opts: &pluginapi.DevicePluginOptions{}}
}

func dev(id string, healthy bool, numa ...int64) *pluginapi.Device {
	d := &pluginapi.Device{ID: id, Health: pluginapi.Healthy}
	if !healthy {
		d.Health = pluginapi.Unhealthy
	}
	if len(numa) > 0 {
		d.Topology = &pluginapi.TopologyInfo{}
		for _, n := range numa {
			d.Topology.Nodes = append(d.Topology.Nodes, &pluginapi.NUMANode{ID: n})
		}
	}
	return d
}

// start serves the plugin and registers it with the manager.
func (s *stub) start() *stub {
	s.t.Helper()
	s.serve()
	if err := s.register(); err != nil {
		s.t.Fatalf("register %s: %v", s.resource, err)
	}
	return s
}

func (s *stub) serve() {
	s.t.Helper()
	path := filepath.Join(s.dir, s.endpoint)
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		s.t.Fatalf("listen: %v", err)
	}
	s.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(s.server, s)
	go func() { _ = s.server.Serve(lis) }()
	s.t.Cleanup(s.stop)
}

func (s *stub) register() error { return s.registerWith(pluginapi.Version) }

func (s *stub) stop() {
	if s.server != nil {
		s.server.Stop()
	}
}

func (s *stub) setDevices(devs ...*pluginapi.Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devs = devs
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *stub) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{
		PreStartRequired:                s.opts.PreStartRequired,
		GetPreferredAllocationAvailable: s.opts.GetPreferredAllocationAvailable,
	}, nil
}

func (s *stub) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		s.mu.Lock()
		resp := &pluginapi.ListAndWatchResponse{Devices: s.devs}
		changed := s.changed
		s.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s *stub) GetPreferredAllocation(ctx context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	s.mu.Lock()
	f := s.preferred
	s.mu.Unlock()
	if f == nil {
		return nil, errors.New("no preference")
	}
	return f(ctx, r)
}

func (s *stub) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	s.mu.Lock()
	f := s.allocate
	for _, c := range r.ContainerRequests {
		s.allocs = append(s.allocs, c.DevicesIds)
	}
	s.mu.Unlock()
	if f != nil {
		return f(ctx, r)
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"STUB_DEVICES": joinIDs(c.DevicesIds)},
			Devices:     []*pluginapi.DeviceSpec{{HostPath: "/dev/null", ContainerPath: "/dev/stub0", Permissions: "rw"}},
			Mounts:      []*pluginapi.Mount{{HostPath: "/opt/stub", ContainerPath: "/opt/stub", ReadOnly: true}},
			Annotations: map[string]string{"stub.example.com/devices": joinIDs(c.DevicesIds)},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "example.com/stub=" + c.DevicesIds[0]}},
		})
	}
	return resp, nil
}

func (s *stub) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.preStarts = append(s.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func joinIDs(ids []string) string {
	out := ""
	for i, id := range ids {
		if i > 0 {
			out += ","
		}
		out += id
	}
	return out
}

// hang blocks until the caller's deadline: a plugin that never answers.
func hang[Req, Resp any](ctx context.Context, _ Req) (Resp, error) {
	<-ctx.Done()
	var zero Resp
	return zero, ctx.Err()
}

// registerWith registers with an explicit API version.
func (s *stub) registerWith(version string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(s.dir, KubeletSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: version, Endpoint: s.endpoint, ResourceName: s.resource, Options: s.opts,
	})
	return err
}

// syncWriter lets a child process's output be read while it runs.
type syncWriter struct {
	mu  sync.Mutex
	buf interface{ Write([]byte) (int, error) }
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
