package devicemanager

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// endpoint is the connection to one registered plugin. Its fields are
// set once; stop cancels every call in flight.
type endpoint struct {
	resource string
	socket   string
	gen      uint64

	ctx    context.Context
	cancel context.CancelFunc

	once   sync.Once
	conn   *grpc.ClientConn
	client pluginapi.DevicePluginClient
	err    error
}

func newEndpoint(resource, socket string, gen uint64) *endpoint {
	ctx, cancel := context.WithCancel(context.Background())
	return &endpoint{resource: resource, socket: socket, gen: gen, ctx: ctx, cancel: cancel}
}

// dial connects lazily; gRPC reconnects by itself, and a dead plugin
// shows up as a failed ListAndWatch.
func (e *endpoint) dial() (pluginapi.DevicePluginClient, error) {
	e.once.Do(func() {
		e.conn, e.err = grpc.NewClient("unix://"+e.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if e.err != nil {
			e.err = fmt.Errorf("dial %s: %w", e.socket, e.err)
			return
		}
		e.client = pluginapi.NewDevicePluginClient(e.conn)
	})
	return e.client, e.err
}

func (e *endpoint) stop() {
	e.cancel()
	e.once.Do(func() { e.err = context.Canceled })
	if e.conn != nil {
		_ = e.conn.Close() // the connection is abandoned either way
	}
}

// runEndpoint asks the plugin for its options, then follows ListAndWatch
// until the stream or the endpoint ends; then the resource is
// disconnected.
func (m *Manager) runEndpoint(e *endpoint) {
	defer m.devices.disconnected(e.resource, e.gen)
	client, err := e.dial()
	if err != nil {
		m.log.Warn("device manager: plugin unreachable", "resource", e.resource, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, m.opts.RPCTimeout)
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	cancel()
	switch {
	case err == nil:
		m.devices.setOptions(e.resource, e.gen, opts)
	case status.Code(err) == codes.Unimplemented:
		// Keep the options sent with the registration.
	case e.ctx.Err() != nil:
		// Replaced by the plugin's next registration, or stopping.
		m.log.Debug("device manager: endpoint ended before its options came", "resource", e.resource)
		return
	default:
		m.log.Warn("device manager: GetDevicePluginOptions", "resource", e.resource, "err", err)
		return
	}
	if err := m.listAndWatch(e, client); err != nil && e.ctx.Err() == nil {
		// A plugin that stops (an upgrade, a restart, the host shutting
		// down) ends its stream: expected. Its devices stay for the grace
		// period, in which it registers again.
		m.log.Info("device manager: the plugin's ListAndWatch stream ended; its devices stay for the grace period",
			"resource", e.resource, "grace", m.opts.GracePeriod, "err", err)
	}
}

// listAndWatch applies every message of the stream. The stream has no
// deadline (it lives as long as the plugin); its context is the
// endpoint's, cancelled when the plugin is replaced or the Manager stops.
func (m *Manager) listAndWatch(e *endpoint, client pluginapi.DevicePluginClient) error {
	stream, err := client.ListAndWatch(e.ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		m.devices.setDevices(e.resource, e.gen, resp.GetDevices())
	}
}

// rpcContext bounds a call to a plugin by the RPC timeout, the caller's
// deadline and the endpoint's life.
func (m *Manager) rpcContext(ctx context.Context, e *endpoint) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RPCTimeout)
	stop := context.AfterFunc(e.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}
