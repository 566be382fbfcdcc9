package gpudriver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

const quarter1 = "partitionable-gpu-1/quarters/quarter-1"

// TestPrepareUnprepare prepares a claim of two instances, checks what a
// container gets through CDI, repeats the prepare, and unprepares twice.
func TestPrepareUnprepare(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	claim := makeClaim("two", "gpu-0", quarter1).sharing("TimeSliced").obj()

	res := r.prepareOne(t, claim)
	if res.Error != "" {
		t.Fatalf("prepare: %s", res.Error)
	}
	want := "gpu.example.com/gpu=uid-two"
	if !slices.Equal(res.CdiDevices, []string{want}) {
		t.Fatalf("CDI devices %v, want [%s]", res.CdiDevices, want)
	}
	env, nodes := injected(t, cfg.CDIDir, want)
	for _, e := range []string{"GPU_DEVICE_IDS=gpu-0," + quarter1, "GPU_CLAIM=default/two", "GPU_SHARING_STRATEGY=TimeSliced"} {
		if !slices.Contains(env, e) {
			t.Errorf("container env %v lacks %s", env, e)
		}
	}
	// Leaves in model order: gpu-0, gpu-1, quarter-0, quarter-1, ...
	if !slices.Equal(nodes, []string{"/dev/gpu-example-0", "/dev/gpu-example-3"}) {
		t.Errorf("device nodes %v, want /dev/gpu-example-0 and -3", nodes)
	}

	spec := filepath.Join(cfg.CDIDir, "gpu.example.com-gpu_uid-two.json")
	before, err := os.Stat(spec)
	if err != nil {
		t.Fatal(err)
	}
	if again := r.prepareOne(t, claim); again.Error != "" || !slices.Equal(again.CdiDevices, []string{want}) {
		t.Errorf("second prepare: %v", again)
	}
	if after, err := os.Stat(spec); err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("second prepare rewrote the spec (err %v)", err)
	}

	r.unprepareOne(t, claim)
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Errorf("spec after unprepare: %v", err)
	}
	r.unprepareOne(t, claim)
	wantState := []string{"prepare uid-two default/two gpu-0,partitionable-gpu-1/quarters/quarter-1", "unprepare uid-two default/two"}
	if got := stateLines(t, cfg.StateFile); !slices.Equal(got, wantState) {
		t.Errorf("state file %q, want %q", got, wantState)
	}
}

func TestNoSharingStrategy(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	res := r.prepareOne(t, makeClaim("plain", "gpu-0").obj())
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	if env, _ := injected(t, cfg.CDIDir, res.CdiDevices...); !slices.Contains(env, "GPU_SHARING_STRATEGY=") {
		t.Errorf("env %v, want an empty GPU_SHARING_STRATEGY", env)
	}
}

// TestPrepareErrors covers claims that cannot be prepared: which error
// code the node agent gets and that no spec is left behind.
func TestPrepareErrors(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	tests := map[string]struct {
		builder *claimBuilder
		code    codes.Code
		want    string
	}{
		"unknown instance": {builder: makeClaim("unknown", "gpu-0", "gpu-9"), code: codes.NotFound, want: `"gpu-9"`},
		"partitioned instance": {builder: makeClaim("parent", "partitionable-gpu-1"), code: codes.NotFound,
			want: `"partitionable-gpu-1" is not an allocatable instance`},
		"no instances": {builder: makeClaim("empty"), code: codes.Unknown, want: "no partitionable instances"},
		"foreign claim parameters": {builder: makeClaim("foreign", "gpu-0").claimParams(map[string]any{"apiVersion": "dra.example.com/v1alpha1", "kind": "CardParameters"}),
			code: codes.Unknown, want: `vendorClaimParameters: apiVersion "dra.example.com/v1alpha1", kind "CardParameters"`},
		"malformed claim parameters": {builder: makeClaim("malformed", "gpu-0").claimParams(map[string]any{"apiVersion": ParametersAPIVersion, "kind": ClaimParametersKind, "spec": map[string]any{"sharing": "yes"}}),
			code: codes.Unknown, want: "vendorClaimParameters: not a GpuClaimParameters"},
		"empty init program": {builder: makeClaim("noprog", "gpu-0").initCommand("", "x"), code: codes.Unknown, want: "vendorClassParameters.initCommand[0]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := tc.builder.obj()
			res := r.prepareOne(t, c)
			if codes.Code(res.ErrorCode) != tc.code || !strings.Contains(res.Error, tc.want) {
				t.Errorf("got code %v, error %q; want %v and an error containing %q", codes.Code(res.ErrorCode), res.Error, tc.code, tc.want)
			}
			if _, err := os.Stat(filepath.Join(cfg.CDIDir, "gpu.example.com-gpu_"+c.Uid+".json")); !os.IsNotExist(err) {
				t.Errorf("failed prepare left a spec: %v", err)
			}
		})
	}
	if lines := stateLines(t, cfg.StateFile); len(lines) != 0 {
		t.Errorf("failed prepares recorded: %q", lines)
	}
}

func TestInitCommand(t *testing.T) {
	cfg := testConfig(t)
	cfg.InitCommandTimeout = 300 * time.Millisecond
	r := start(t, cfg)
	out := filepath.Join(t.TempDir(), "init.out")

	ok := makeClaim("init", quarter1).initCommand("/bin/sh", "-c", `echo "$GPU_DEVICE_IDS $GPU_CLAIM" > `+out).obj()
	if res := r.prepareOne(t, ok); res.Error != "" {
		t.Fatalf("prepare: %s", res.Error)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("initCommand did not run: %v", err)
	}
	if got := strings.TrimSpace(string(data)); got != quarter1+" default/init" {
		t.Errorf("initCommand saw %q", got)
	}

	failing := makeClaim("initfail", "gpu-0").initCommand("/bin/sh", "-c", "echo GPU busy >&2; exit 3").obj()
	res := r.prepareOne(t, failing)
	if !strings.Contains(res.Error, "GPU busy") || !strings.Contains(res.Error, "exit status 3") {
		t.Errorf("failing initCommand: %q, want its output and exit status", res.Error)
	}

	hanging := makeClaim("inithang", "gpu-0").initCommand("/bin/sh", "-c", "sleep 60; echo late").obj()
	if res := r.prepareOne(t, hanging); !strings.Contains(res.Error, "timed out after 300ms") {
		t.Errorf("hanging initCommand: %q, want a timeout", res.Error)
	}
	for _, c := range []string{failing.Uid, hanging.Uid} {
		if _, err := os.Stat(filepath.Join(cfg.CDIDir, "gpu.example.com-gpu_"+c+".json")); !os.IsNotExist(err) {
			t.Errorf("claim %s: spec written despite a failed initCommand", c)
		}
	}
}

func TestFailPrepares(t *testing.T) {
	cfg := testConfig(t)
	cfg.FailPrepares = 2
	r := start(t, cfg)
	a, b := makeClaim("a", "gpu-0").obj(), makeClaim("b", quarter1).obj()
	for i, want := range []string{"injected failure 1 of 2", "injected failure 2 of 2", ""} {
		res := r.prepare(t, a, b)
		if got := res[a.Uid].Error; !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("claim a, call %d: error %q, want %q", i+1, got, want)
		}
		if got := res[b.Uid].Error; !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("claim b, call %d: error %q, want %q", i+1, got, want)
		}
	}
	c := makeClaim("c", "partitionable-gpu-1/full-gpu/gpu-1").obj()
	if res := r.prepareOne(t, c); !strings.Contains(res.Error, "injected failure 1 of 2") {
		t.Errorf("a new claim starts its own count: %q", res.Error)
	}
}

// TestRestart checks that prepared state lives on disk: a restarted
// driver answers a repeated prepare without preparing again, and
// unprepares what its predecessor prepared.
func TestRestart(t *testing.T) {
	cfg := testConfig(t)
	claim := makeClaim("survivor", "gpu-0").obj()
	first := start(t, cfg)
	if res := first.prepareOne(t, claim); res.Error != "" {
		t.Fatal(res.Error)
	}
	first.stop(t)
	for _, s := range []string{filepath.Join(cfg.PluginsRegistryDir, DriverName+"-reg.sock"), filepath.Join(cfg.PluginDir, "dra.sock")} {
		if _, err := os.Stat(s); !os.IsNotExist(err) {
			t.Errorf("socket %s left after stop: %v", s, err)
		}
	}

	second := start(t, cfg)
	if res := second.prepareOne(t, claim); res.Error != "" || !slices.Equal(res.CdiDevices, []string{"gpu.example.com/gpu=uid-survivor"}) {
		t.Errorf("prepare after restart: %v", res)
	}
	second.unprepareOne(t, claim)
	want := []string{"prepare uid-survivor default/survivor gpu-0", "unprepare uid-survivor default/survivor"}
	if got := stateLines(t, cfg.StateFile); !slices.Equal(got, want) {
		t.Errorf("state file %q, want %q", got, want)
	}
}

// TestPrepareDelay checks that a delayed prepare completes, and that one
// whose caller gives up is not prepared.
func TestPrepareDelay(t *testing.T) {
	cfg := testConfig(t)
	cfg.PrepareDelay = 200 * time.Millisecond
	r := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	abandoned := makeClaim("abandoned", quarter1).obj()
	if _, err := r.node.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{abandoned}}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("prepare past its deadline: %v, want DeadlineExceeded", err)
	}
	if res := r.prepareOne(t, makeClaim("slow", "gpu-0").obj()); res.Error != "" {
		t.Errorf("delayed prepare: %s", res.Error)
	}
	want := []string{"prepare uid-slow default/slow gpu-0"}
	if lines := stateLines(t, cfg.StateFile); !slices.Equal(lines, want) {
		t.Errorf("state file %q, want %q", lines, want)
	}
	if _, err := os.Stat(filepath.Join(cfg.CDIDir, "gpu.example.com-gpu_"+abandoned.Uid+".json")); !os.IsNotExist(err) {
		t.Errorf("abandoned prepare wrote a spec: %v", err)
	}
}
