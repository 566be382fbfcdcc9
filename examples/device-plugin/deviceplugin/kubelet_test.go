package deviceplugin

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// kubeletStub is a real Registration server on DIR/kubelet.sock that
// records every registration.
type kubeletStub struct {
	pluginapi.UnimplementedRegistrationServer
	srv  *grpc.Server
	path string
	reqs chan *pluginapi.RegisterRequest
}

func startKubelet(t *testing.T, dir string) *kubeletStub {
	t.Helper()
	k := &kubeletStub{srv: grpc.NewServer(), path: filepath.Join(dir, kubeletSocket), reqs: make(chan *pluginapi.RegisterRequest, 10)}
	lis, err := net.Listen("unix", k.path)
	if err != nil {
		t.Fatalf("listen on kubelet.sock: %v", err)
	}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	t.Cleanup(k.stop)
	return k
}

func (k *kubeletStub) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- r
	return &pluginapi.Empty{}, nil
}

// stop ends the server and removes its socket, as a restarting kubelet
// does.
func (k *kubeletStub) stop() {
	k.srv.Stop()
	_ = os.Remove(k.path)
}

// registration waits for the next registration.
func (k *kubeletStub) registration(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.reqs:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the plugin to register")
		return nil
	}
}

// waitTimeout bounds every wait of the tests; conditions are polled.
const waitTimeout = 20 * time.Second

// socketDir is a short temporary directory for unix sockets (t.TempDir
// paths can exceed the 108-byte limit).
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// dialPlugin connects to the plugin's socket in dir.
func dialPlugin(t *testing.T, dir, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, socket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// writeFile replaces path atomically, so pollers never read half a file.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newTestLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
