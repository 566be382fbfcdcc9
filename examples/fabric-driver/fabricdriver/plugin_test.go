package fabricdriver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// plugin is a kubelet plugin started with RunPlugin, seen from the node
// agent's side through real unix sockets.
type plugin struct {
	cfg  PluginConfig
	node drapb.NodeClient
}

// startPlugin runs the plugin with the built-in pools in fresh short
// directories until the test ends, and connects as the node agent does:
// through the registration socket.
func startPlugin(t *testing.T) *plugin {
	t.Helper()
	dir, err := os.MkdirTemp("", "fp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := PluginConfig{
		PluginsRegistryDir: filepath.Join(dir, "reg"), PluginDir: filepath.Join(dir, "fabric"),
		CDIDir: filepath.Join(dir, "cdi"), AttachDir: filepath.Join(dir, "attached"),
		StopGracePeriod: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunPlugin(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunPlugin: %v", err)
		}
	})
	regSock := filepath.Join(cfg.PluginsRegistryDir, DriverName+"-reg.sock")
	eventually(t, "the registration socket", func() bool {
		select {
		case err := <-done:
			t.Fatalf("RunPlugin ended early: %v", err)
		default:
		}
		_, err := os.Stat(regSock)
		return err == nil
	})
	info, err := registerapi.NewRegistrationClient(dial(t, regSock)).GetInfo(testContext(t), &registerapi.InfoRequest{})
	if err != nil || info.Name != DriverName || info.Type != drapb.PluginType {
		t.Fatalf("GetInfo = %v, %v", info, err)
	}
	return &plugin{cfg: cfg, node: drapb.NewNodeClient(dial(t, info.Endpoint))}
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

func claimWith(uid, data string) *drapb.Claim {
	return &drapb.Claim{Namespace: "default", Name: "claim-" + uid, Uid: uid, ResourceHandle: data}
}

func (p *plugin) prepare(t *testing.T, c *drapb.Claim) *drapb.NodePrepareResourceResponse {
	t.Helper()
	resp, err := p.node.NodePrepareResources(testContext(t), &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{c}})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	return resp.Claims[c.Uid]
}

func (p *plugin) unprepare(t *testing.T, c *drapb.Claim) {
	t.Helper()
	resp, err := p.node.NodeUnprepareResources(testContext(t), &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{c}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	if r := resp.Claims[c.Uid]; r == nil || r.Error != "" {
		t.Fatalf("unprepare %s: %v", c.Uid, r)
	}
}

// attached lists the unit files of a claim.
func (p *plugin) attached(t *testing.T, uid string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.cfg.AttachDir, uid))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// env resolves CDI devices with a real CDI cache, as the node's runtime
// does, and returns the FABRIC_ variables a container gets.
func (p *plugin) env(t *testing.T, devices ...string) []string {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(p.cfg.CDIDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, devices...); err != nil {
		t.Fatalf("inject %v: %v", devices, err)
	}
	var out []string
	for _, e := range spec.Process.Env {
		if strings.HasPrefix(e, "FABRIC_") {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

func TestPluginPublishesNoResources(t *testing.T) {
	p := startPlugin(t)
	stream, err := p.node.NodeListAndWatchResources(testContext(t), &drapb.NodeListAndWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var m resourcev1alpha2.NodeResourceModel
	if err := json.Unmarshal(msg.ResourceModel, &m); err != nil || m.Partitionable == nil || len(m.Partitionable.ResourceInstances) != 0 {
		t.Fatalf("model %s (%v), want an empty partitionable model", msg.ResourceModel, err)
	}
}

// TestPluginPrepareUnprepare: prepare attaches once and hands the units
// to containers; repeating either call changes nothing.
func TestPluginPrepareUnprepare(t *testing.T) {
	p := startPlugin(t)
	c := claimWith("uid-1", Handle{Pool: "rack-1", Model: "fpga-a", Units: []string{"rack-1-0", "rack-1-2"}}.Encode())
	first := p.prepare(t, c)
	if first.Error != "" || len(first.CdiDevices) != 1 || first.CdiDevices[0] != CDIKind+"=uid-1" {
		t.Fatalf("prepare = %v, want device %s=uid-1", first, CDIKind)
	}
	unit := filepath.Join(p.cfg.AttachDir, "uid-1", "rack-1-0")
	before, err := os.Stat(unit)
	if err != nil {
		t.Fatal(err)
	}
	if again := p.prepare(t, c); again.Error != "" || !slices.Equal(again.CdiDevices, first.CdiDevices) {
		t.Fatalf("prepare again = %v, want the same device", again)
	}
	if after, err := os.Stat(unit); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("prepare again rewrote %s", unit)
	}
	if got := p.attached(t, "uid-1"); !slices.Equal(got, []string{"rack-1-0", "rack-1-2"}) {
		t.Errorf("attached %v, want rack-1-0 and rack-1-2", got)
	}
	if got := p.env(t, first.CdiDevices...); !slices.Equal(got, []string{"FABRIC_MODEL=fpga-a", "FABRIC_POOL=rack-1", "FABRIC_UNITS=rack-1-0,rack-1-2"}) {
		t.Errorf("container env %v", got)
	}

	p.unprepare(t, c)
	p.unprepare(t, c)
	if got := p.attached(t, "uid-1"); got != nil {
		t.Errorf("still attached after unprepare: %v", got)
	}
	if _, err := os.Stat(filepath.Join(p.cfg.CDIDir, "fabric.example.com-accelerator_uid-1.json")); !os.IsNotExist(err) {
		t.Errorf("CDI spec after unprepare: %v", err)
	}
	// Prepared again after a detach: attached again.
	if r := p.prepare(t, c); r.Error != "" || len(p.attached(t, "uid-1")) != 2 {
		t.Errorf("prepare after unprepare: %v, attached %v", r, p.attached(t, "uid-1"))
	}
}

// TestPluginFallback: an optional claim that got nothing runs with empty
// variables and attaches nothing.
func TestPluginFallback(t *testing.T) {
	p := startPlugin(t)
	r := p.prepare(t, claimWith("uid-2", Handle{Fallback: true}.Encode()))
	if r.Error != "" {
		t.Fatalf("prepare fallback: %s", r.Error)
	}
	if got := p.env(t, r.CdiDevices...); !slices.Equal(got, []string{"FABRIC_MODEL=", "FABRIC_POOL=", "FABRIC_UNITS="}) {
		t.Errorf("container env %v, want empty FABRIC_ variables", got)
	}
	if got := p.attached(t, "uid-2"); len(got) != 0 {
		t.Errorf("attached %v for a fallback", got)
	}
}

func TestPluginRejects(t *testing.T) {
	p := startPlugin(t)
	tests := map[string]struct {
		claim    *drapb.Claim
		code     codes.Code
		contains string
	}{
		"unknown pool":   {claimWith("u1", Handle{Pool: "rack-9", Units: []string{"rack-9-0"}}.Encode()), codes.NotFound, `pool "rack-9" is not configured`},
		"unit beyond":    {claimWith("u2", Handle{Pool: "rack-2", Units: []string{"rack-2-2"}}.Encode()), codes.NotFound, `unit "rack-2-2" is not a unit of pool rack-2`},
		"unit twice":     {claimWith("u3", Handle{Pool: "rack-1", Units: []string{"rack-1-0", "rack-1-0"}}.Encode()), codes.Unknown, "listed twice"},
		"no handle":      {claimWith("u4", ""), codes.Unknown, "resourceHandle: empty"},
		"not json":       {claimWith("u5", "{"), codes.Unknown, "resourceHandle: not a fabric.example.com handle"},
		"uid not a name": {claimWith("..", Handle{Pool: "rack-1", Units: []string{"rack-1-0"}}.Encode()), codes.Unknown, `claim uid ".."`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := p.prepare(t, tc.claim)
			if codes.Code(r.ErrorCode) != tc.code || !strings.Contains(r.Error, tc.contains) {
				t.Fatalf("prepare = %q (code %d), want code %s and %q", r.Error, r.ErrorCode, tc.code, tc.contains)
			}
		})
	}
}
