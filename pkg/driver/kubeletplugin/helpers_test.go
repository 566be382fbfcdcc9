package kubeletplugin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// fakeDriver is a Driver whose behaviour tests swap through function
// fields; nil functions succeed.
type fakeDriver struct {
	mu           sync.Mutex
	model        resourcev1alpha2.NodeResourceModel
	enumerateErr error
	prepare      func(context.Context, Claim) ([]string, error)
	unprepare    func(context.Context, Claim) error
}

func (d *fakeDriver) Enumerate(context.Context) (resourcev1alpha2.NodeResourceModel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.model, d.enumerateErr
}

func (d *fakeDriver) setModel(m resourcev1alpha2.NodeResourceModel) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.model = m
}

func (d *fakeDriver) Prepare(ctx context.Context, c Claim) ([]string, error) {
	if d.prepare == nil {
		return []string{"example.com/gpu=" + string(c.UID)}, nil
	}
	return d.prepare(ctx, c)
}

func (d *fakeDriver) Unprepare(ctx context.Context, c Claim) error {
	if d.unprepare == nil {
		return nil
	}
	return d.unprepare(ctx, c)
}

// instances is a partitionable model of root instances with the given
// names.
func instances(names ...string) resourcev1alpha2.NodeResourceModel {
	p := &resourcev1alpha2.PartitionableResources{}
	for _, n := range names {
		p.ResourceInstances = append(p.ResourceInstances, resourcev1alpha2.ResourceInstance{Name: n})
	}
	return resourcev1alpha2.NodeResourceModel{Partitionable: p}
}

// socketDir is a short temporary directory: unix socket paths are limited
// to 108 bytes, which t.TempDir() can exceed.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testOptions are Options in a fresh directory.
func testOptions(t *testing.T) Options {
	dir := socketDir(t)
	return Options{
		DriverName:         "gpu.example.com",
		PluginsRegistryDir: filepath.Join(dir, "registry"),
		PluginDir:          filepath.Join(dir, "plugins", "gpu.example.com"),
		Logger:             testLogger(t),
		StopGracePeriod:    5 * time.Second,
	}
}

func startPlugin(t *testing.T, d Driver, opts Options) *Plugin {
	t.Helper()
	p, err := Start(context.Background(), d, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// agent plays the node agent: it finds the plugin through its registration
// socket, as the plugin watcher does, and dials the DRA socket it names.
type agent struct {
	reg  registerapi.RegistrationClient
	node drapb.NodeClient
	info *registerapi.PluginInfo
}

func newAgent(t *testing.T, regSocket string) *agent {
	t.Helper()
	a := &agent{reg: registerapi.NewRegistrationClient(dial(t, regSocket))}
	info, err := a.reg.GetInfo(testContext(t), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	a.info = info
	a.node = drapb.NewNodeClient(dial(t, info.Endpoint))
	return a
}

// testContext is a context with a generous deadline, as every call of the
// node agent has one.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// handle is the JSON of a structured handle allocating ids.
func handle(t *testing.T, ids ...string) []byte {
	t.Helper()
	h := resourcev1alpha2.StructuredResourceHandle{NodeName: "node-1", Partitionable: &resourcev1alpha2.PartitionableAllocationResult{}}
	for _, id := range ids {
		h.Partitionable.Instances = append(h.Partitionable.Instances, resourcev1alpha2.AllocatedResourceInstance{ID: id})
	}
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
