package gpudriver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/runtime"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// testConfig is a Config in fresh directories. Socket paths stay short.
func testConfig(t *testing.T) Config {
	t.Helper()
	dir, err := os.MkdirTemp("", "gd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Config{
		CDIDir:             filepath.Join(dir, "cdi"),
		PluginsRegistryDir: filepath.Join(dir, "reg"),
		PluginDir:          filepath.Join(dir, "gpu"),
		StateFile:          filepath.Join(dir, "state"),
		Logger:             logger,
	}
}

// running is a driver started with Run, seen from the node agent's side.
type running struct {
	node   drapb.NodeClient
	cancel context.CancelFunc
	done   chan error
}

// start runs the driver until the test ends (or stop) and connects to it
// as the node agent does: through the registration socket.
func start(t *testing.T, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(func() { r.stop(t) })
	regSock := filepath.Join(cfg.PluginsRegistryDir, DriverName+"-reg.sock")
	eventually(t, "the registration socket", func() bool {
		select {
		case err := <-r.done:
			t.Fatalf("Run ended early: %v", err)
		default:
		}
		_, err := os.Stat(regSock)
		return err == nil
	})
	info, err := registerapi.NewRegistrationClient(dial(t, regSock)).GetInfo(testContext(t), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Name != DriverName || info.Type != drapb.PluginType {
		t.Fatalf("GetInfo = %v", info)
	}
	r.node = drapb.NewNodeClient(dial(t, info.Endpoint))
	return r
}

// stop ends Run and checks that it returned nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func (r *running) prepare(t *testing.T, claims ...*drapb.Claim) map[string]*drapb.NodePrepareResourceResponse {
	t.Helper()
	resp, err := r.node.NodePrepareResources(testContext(t), &drapb.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	return resp.Claims
}

// prepareOne prepares one claim and returns its result.
func (r *running) prepareOne(t *testing.T, c *drapb.Claim) *drapb.NodePrepareResourceResponse {
	t.Helper()
	res := r.prepare(t, c)[c.Uid]
	if res == nil {
		t.Fatalf("no result for claim %s", c.Uid)
	}
	return res
}

func (r *running) unprepareOne(t *testing.T, c *drapb.Claim) {
	t.Helper()
	resp, err := r.node.NodeUnprepareResources(testContext(t), &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{c}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	if res := resp.Claims[c.Uid]; res == nil || res.Error != "" {
		t.Fatalf("unprepare %s: %v", c.Uid, res)
	}
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

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

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

// claimBuilder builds the claim the node agent sends.
type claimBuilder struct {
	name string
	h    resourcev1alpha2.StructuredResourceHandle
}

func makeClaim(name string, ids ...string) *claimBuilder {
	b := &claimBuilder{name: name}
	b.h.NodeName = "node-1"
	b.h.Partitionable = &resourcev1alpha2.PartitionableAllocationResult{}
	for _, id := range ids {
		b.h.Partitionable.Instances = append(b.h.Partitionable.Instances, resourcev1alpha2.AllocatedResourceInstance{ID: id})
	}
	return b
}

// claimParams sets the vendor claim parameters to obj (marshalled).
func (b *claimBuilder) claimParams(obj any) *claimBuilder {
	b.h.VendorClaimParameters = raw(obj)
	return b
}

// sharing sets GpuClaimParameters with a sharing strategy, as the
// scheduler snapshots them (metadata included).
func (b *claimBuilder) sharing(strategy string) *claimBuilder {
	return b.claimParams(map[string]any{
		"apiVersion": ParametersAPIVersion, "kind": ClaimParametersKind,
		"metadata": map[string]any{"name": "p", "namespace": "default", "uid": "x"},
		"spec":     map[string]any{"count": 1, "minimumMemory": "8Gi", "sharing": map[string]any{"strategy": strategy}},
	})
}

func (b *claimBuilder) initCommand(argv ...string) *claimBuilder {
	b.h.VendorClassParameters = raw(map[string]any{
		"apiVersion": ParametersAPIVersion, "kind": ClassParametersKind,
		"metadata": map[string]any{"name": "admin"}, "initCommand": argv,
	})
	return b
}

func (b *claimBuilder) obj() *drapb.Claim {
	data, err := json.Marshal(b.h)
	if err != nil {
		panic(err)
	}
	return &drapb.Claim{Namespace: "default", Name: b.name, Uid: "uid-" + b.name, StructuredResourceHandle: data}
}

func raw(obj any) *runtime.RawExtension {
	data, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return &runtime.RawExtension{Raw: data}
}

// injected resolves CDI device names in dir with a real CDI cache, as the
// node's runtime does, and returns the container's env and device paths.
func injected(t *testing.T, dir string, devices ...string) (env, deviceNodes []string) {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, devices...); err != nil {
		t.Fatalf("inject %v: %v", devices, err)
	}
	for _, d := range spec.Linux.Devices {
		deviceNodes = append(deviceNodes, d.Path)
	}
	return spec.Process.Env, deviceNodes
}

// stateLines reads the state file.
func stateLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	return lines
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.TrimLeft(content, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}
