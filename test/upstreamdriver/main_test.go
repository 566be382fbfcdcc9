package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

const (
	testDriver = "upstream.example.com"
	testNode   = "node-a"
	testUID    = types.UID("0b6f5f5c-3b1e-4d0a-9c1e-7a1f2f3e4d5c")
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseFlagsDefaults(t *testing.T) {
	c, err := parseFlags(nil, env("NODE_NAME", testNode), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		driverName:   testDriver,
		nodeName:     testNode,
		registrarDir: "/var/lib/kubelet/plugins_registry",
		pluginsDir:   "/var/lib/kubelet/plugins",
		cdiRoot:      "/var/run/cdi",
		gpus:         2,
		publish:      true,
		serialize:    true,
		profile:      profileGPU,
		nics:         2,
		numaNodes:    2,
		cpusPerNUMA:  4,

		satisfyBindingConditions: -1,
	}
	if c != want {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if got, want := c.registrationSocket(), "/var/lib/kubelet/plugins_registry/upstream.example.com-reg.sock"; got != want {
		t.Errorf("registration socket %q, want %q", got, want)
	}
	if got, want := c.draSocket(), "/var/lib/kubelet/plugins/upstream.example.com/dra.sock"; got != want {
		t.Errorf("DRA socket %q, want %q", got, want)
	}
	if n := len(c.pluginOptions(nil)); n != 6 {
		t.Errorf("%d options, want 6 (no RollingUpdate)", n)
	}
}

func TestParseFlagsAll(t *testing.T) {
	args := []string{
		"--driver-name=gpu.test.io", "--node-name=n2", "--kubeconfig=/k", "--kubelet-registrar-directory-path=/r",
		"--kubelet-plugins-directory-path=/p", "--cdi-root=/c", "--gpus=4", "--state-file=/s", "--prepare-hold-file=/h",
		"--health-file=/hf", "--rolling-update-uid=uid-1", "--publish=false", "--serialize=false",
		"--gpu-partitions=2", "--gpu-allow-multiple-allocations", "--binding-conditions", "--satisfy-binding-conditions=250ms",
		"--fail-binding", "--nics=3", "--numa-nodes=4", "--cpus-per-numa-node=8", "--controller-kubeconfig=/ck",
	}
	c, err := parseFlags(args, env("NODE_NAME", "ignored"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{driverName: "gpu.test.io", nodeName: "n2", kubeconfig: "/k", registrarDir: "/r", pluginsDir: "/p",
		cdiRoot: "/c", gpus: 4, stateFile: "/s", prepareHoldFile: "/h", healthFile: "/hf", rollingUpdateUID: "uid-1",
		profile: profileGPU, gpuPartitions: 2, gpuMultipleAllocations: true, bindingConditions: true,
		satisfyBindingConditions: 250 * time.Millisecond, failBinding: true, nics: 3, numaNodes: 4, cpusPerNUMA: 8, controllerKubeconfig: "/ck"}
	if c != want {
		t.Errorf("\n got %+v\nwant %+v", c, want)
	}
	if got, want := c.registrationSocket(), "/r/gpu.test.io-uid-1-reg.sock"; got != want {
		t.Errorf("registration socket %q, want %q", got, want)
	}
	if got, want := c.draSocket(), "/p/gpu.test.io/dra-uid-1.sock"; got != want {
		t.Errorf("DRA socket %q, want %q", got, want)
	}
	if n := len(c.pluginOptions(nil)); n != 7 {
		t.Errorf("%d options, want 7 (with RollingUpdate)", n)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	long := "/" + strings.Repeat("d", 100)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no node":         {nil, "--node-name (or NODE_NAME) is required"},
		"bad driver":      {[]string{"--node-name=n", "--driver-name=Not_A_Name"}, "--driver-name"},
		"too many gpus":   {[]string{"--node-name=n", "--gpus=129"}, "--gpus 129"},
		"negative gpus":   {[]string{"--node-name=n", "--gpus=-1"}, "--gpus -1"},
		"relative cdi":    {[]string{"--node-name=n", "--cdi-root=cdi"}, "--cdi-root"},
		"long socket":     {[]string{"--node-name=n", "--kubelet-plugins-directory-path=" + long}, "longer than 108"},
		"extra argument":  {[]string{"--node-name=n", "x"}, "unexpected arguments"},
		"unknown flag":    {[]string{"--registrar-dir=/x"}, "flag provided but not defined"},
		"bad bool":        {[]string{"--publish=maybe"}, "invalid boolean"},
		"bad gpus number": {[]string{"--gpus=two"}, "invalid value"},
		"bad profile":     {[]string{"--node-name=n", "--profile=tpu"}, `--profile "tpu": must be gpu, net or cpu`},
		"gpu flag on net": {[]string{"--node-name=n", "--profile=net", "--binding-conditions"}, "belong to --profile gpu"},
		"too many parts":  {[]string{"--node-name=n", "--gpus=64", "--gpu-partitions=2"}, "--gpu-partitions 2"},
		"no cpus":         {[]string{"--node-name=n", "--profile=cpu", "--cpus-per-numa-node=0"}, "--cpus-per-numa-node 0"},
		"too many nics":   {[]string{"--node-name=n", "--profile=net", "--nics=200"}, "--nics 200"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags(tc.args, env(), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := parseFlags([]string{"-h"}, env(), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if code := run([]string{"--gpus=x"}, env(), io.Discard); code != 2 {
		t.Errorf("run with a bad flag: exit %d, want 2", code)
	}
}

func TestInventory(t *testing.T) {
	res := gpuInv(3).resources(testNode)
	pool, ok := res.Pools[testNode]
	if !ok || len(res.Pools) != 1 || len(pool.Slices) != 1 {
		t.Fatalf("want one pool %q with one slice, got %+v", testNode, res)
	}
	devs := pool.Slices[0].Devices
	var names, uuids []string
	for i, d := range devs {
		names = append(names, d.Name)
		if got := *d.Attributes["index"].IntValue; got != int64(i) {
			t.Errorf("%s: index %d", d.Name, got)
		}
		if got := *d.Attributes["model"].StringValue; got != "UPSTREAM-GPU" {
			t.Errorf("%s: model %q", d.Name, got)
		}
		if q := d.Capacity["memory"].Value; q.String() != "16Gi" {
			t.Errorf("%s: memory %s", d.Name, q.String())
		}
		uuids = append(uuids, *d.Attributes["uuid"].StringValue)
	}
	if !slices.Equal(names, []string{"gpu-0", "gpu-1", "gpu-2"}) {
		t.Errorf("names %v", names)
	}
	if uuids[0] == uuids[1] || uuids[0] != deviceUUID(testNode, 0) || uuids[0] == deviceUUID("node-b", 0) || len(uuids[0]) != 36 {
		t.Errorf("uuids not stable, distinct and UUID-shaped: %v", uuids)
	}
	for name, want := range map[string]bool{"gpu-0": true, "gpu-2": true, "gpu-3": false, "gpu-01": false, "gpu--1": false, "cpu-0": false} {
		if _, ok := gpuInv(3).envPrefix(testNode, name); ok != want {
			t.Errorf("envPrefix(%q) of 3 GPUs ok=%v, want %v", name, ok, want)
		}
	}
}

// gpuInv is the default profile with n GPUs.
func gpuInv(n int) inventory { return inventory{profile: profileGPU, gpus: n} }

func opaque(driver string, params string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source:   resourceapi.AllocationConfigSourceClaim,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)},
		}},
	}
}

// testClaim has request a (gpu-0), request b/sub (gpu-1), and a device of
// another driver.
func testClaim(configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{}
	c.Namespace, c.Name, c.UID = "ns", "claim", testUID
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "a", Driver: testDriver, Pool: testNode, Device: "gpu-0"},
			{Request: "b/sub", Driver: testDriver, Pool: testNode, Device: "gpu-1"},
			{Request: "c", Driver: "other.example.com", Pool: testNode, Device: "gpu-0"},
		},
		Config: configs,
	}}
	return c
}

func TestClaimSpec(t *testing.T) {
	claim := testClaim(
		opaque(testDriver, `{"env":{"ALL":"1","X":"class"}}`),
		opaque("other.example.com", `not json`),
		opaque(testDriver, `{"env":{"X":"b"}}`, "b"),
		opaque(testDriver, `{"env":{"ONLY_A":"yes"}}`, "a/other", "a"),
	)
	spec, devs, err := claimSpec(testDriver, testNode, gpuInv(2), claim)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(spec)
	want := `{"cdiVersion":"0.5.0","kind":"upstream.example.com/gpu","devices":[` +
		`{"name":"` + string(testUID) + `-gpu-0","containerEdits":{"env":["GPU_DEVICE_0=gpu-0","ALL=1","ONLY_A=yes","X=class"]}},` +
		`{"name":"` + string(testUID) + `-gpu-1","containerEdits":{"env":["GPU_DEVICE_1=gpu-1","ALL=1","X=b"]}}],"containerEdits":{}}`
	if string(got) != want {
		t.Errorf("spec:\n got %s\nwant %s", got, want)
	}
	wantDevs := []kubeletplugin.Device{
		{Requests: []string{"a"}, PoolName: testNode, DeviceName: "gpu-0", CDIDeviceIDs: []string{"upstream.example.com/gpu=" + string(testUID) + "-gpu-0"}},
		{Requests: []string{"b/sub"}, PoolName: testNode, DeviceName: "gpu-1", CDIDeviceIDs: []string{"upstream.example.com/gpu=" + string(testUID) + "-gpu-1"}},
	}
	gotDevs, _ := json.Marshal(devs)
	wantJSON, _ := json.Marshal(wantDevs)
	if !bytes.Equal(gotDevs, wantJSON) {
		t.Errorf("devices:\n got %s\nwant %s", gotDevs, wantJSON)
	}

	// The file is what a container runtime's CDI cache accepts.
	dir := t.TempDir()
	path := specPath(dir, testDriver, testUID)
	if filepath.Base(path) != testDriver+"-"+string(testUID)+".json" {
		t.Errorf("spec file %s", path)
	}
	for range 2 { // idempotent
		if err := writeSpec(path, spec); err != nil {
			t.Fatal(err)
		}
	}
	read, err := cdiapi.ReadSpec(path, 0)
	if err != nil {
		t.Fatalf("CDI rejects the spec: %v", err)
	}
	if dev := read.GetDevice(string(testUID) + "-gpu-1"); dev == nil {
		t.Errorf("CDI spec has no device %s-gpu-1", testUID)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %d files in the CDI root, want 1", len(entries))
	}
	for range 2 { // a missing file is success
		if err := removeSpec(path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec still there: %v", err)
	}
}

func TestClaimSpecErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		claim func() *resourceapi.ResourceClaim
		want  string
	}{
		"not allocated": {func() *resourceapi.ResourceClaim { c := testClaim(); c.Status.Allocation = nil; return c }, "not allocated"},
		"other pool": {func() *resourceapi.ResourceClaim {
			c := testClaim()
			c.Status.Allocation.Devices.Results[1].Pool = "node-b"
			return c
		}, "not in this node's pool"},
		"unknown device": {func() *resourceapi.ResourceClaim {
			c := testClaim()
			c.Status.Allocation.Devices.Results[1].Device = "gpu-7"
			return c
		}, `device "gpu-7" is not one this driver publishes (profile gpu)`},
		"bad config":   {func() *resourceapi.ResourceClaim { return testClaim(opaque(testDriver, `{"env":1}`)) }, "opaque config"},
		"bad env name": {func() *resourceapi.ResourceClaim { return testClaim(opaque(testDriver, `{"env":{"A=B":"1"}}`)) }, "invalid env name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := claimSpec(testDriver, testNode, gpuInv(2), tc.claim())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}

	spec, devs, err := claimSpec("none.example.com", testNode, gpuInv(2), testClaim())
	if err != nil || spec != nil || devs == nil || len(devs) != 0 {
		t.Errorf("a claim without this driver's devices: spec %v, devices %v, err %v; want nil spec and an empty result", spec, devs, err)
	}
}

func testDriverFor(t *testing.T, mutate func(*config)) (*driver, *[]error) {
	t.Helper()
	dir := t.TempDir()
	cfg := config{driverName: testDriver, nodeName: testNode, gpus: 2, cdiRoot: dir, stateFile: filepath.Join(dir, "state")}
	if mutate != nil {
		mutate(&cfg)
	}
	var fatal []error
	return &driver{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), fatal: func(err error) { fatal = append(fatal, err) }}, &fatal
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestPrepareUnprepare(t *testing.T) {
	d, _ := testDriverFor(t, nil)
	ctx := context.Background()
	bad := testClaim()
	bad.UID = "bad-claim"
	bad.Status.Allocation.Devices.Results[0].Device = "gpu-9"

	res, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{testClaim(), bad})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[testUID]; r.Err != nil || len(r.Devices) != 2 {
		t.Errorf("good claim: %+v", r)
	}
	if r := res["bad-claim"]; r.Err == nil {
		t.Errorf("bad claim prepared: %+v", r)
	}
	specFile := specPath(d.cfg.cdiRoot, testDriver, testUID)
	if _, err := os.Stat(specFile); err != nil {
		t.Errorf("no spec file: %v", err)
	}

	claims := []kubeletplugin.NamespacedObject{{UID: testUID}, {UID: "never-prepared"}}
	for range 2 {
		ures, err := d.UnprepareResourceClaims(ctx, claims)
		if err != nil || len(ures) != 2 || ures[testUID] != nil || ures["never-prepared"] != nil {
			t.Fatalf("unprepare: %v, %v", ures, err)
		}
	}
	if _, err := os.Stat(specFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec file left: %v", err)
	}
	want := []string{
		"prepare " + string(testUID) + " gpu-0,gpu-1",
		"unprepare " + string(testUID), "unprepare never-prepared",
		"unprepare " + string(testUID), "unprepare never-prepared",
	}
	if got := readLines(t, d.cfg.stateFile); !slices.Equal(got, want) {
		t.Errorf("state file:\n got %q\nwant %q", got, want)
	}
	if got := stateLine("prepare", "u1", "gpu-0", "gpu-1"); got != "prepare u1 gpu-0,gpu-1\n" {
		t.Errorf("stateLine with devices = %q", got)
	}
	if got := stateLine("prepare", "u1"); got != "prepare u1\n" {
		t.Errorf("stateLine %q", got)
	}
}

func TestStateFileUnwritable(t *testing.T) {
	d, _ := testDriverFor(t, func(c *config) { c.stateFile = filepath.Join(c.cdiRoot, "missing-dir", "state") })
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{testClaim()})
	if err != nil || res[testUID].Err == nil || !strings.Contains(res[testUID].Err.Error(), "state file") {
		t.Errorf("prepare with an unwritable state file: %+v, %v; want a per-claim error", res, err)
	}
}

func TestPrepareHold(t *testing.T) {
	d, _ := testDriverFor(t, nil)
	d.cfg.prepareHoldFile = filepath.Join(d.cfg.cdiRoot, "hold")
	if err := os.WriteFile(d.cfg.prepareHoldFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Cancelled while held: nothing is done.
	ctx, cancel := context.WithTimeout(context.Background(), 3*holdPoll)
	defer cancel()
	if _, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{testClaim()}); err == nil {
		t.Fatal("held prepare returned no error on cancel")
	}
	if _, err := os.Stat(d.cfg.stateFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("held prepare wrote the state file: %v", err)
	}
	// Released: it goes on.
	done := make(chan error, 1)
	go func() {
		res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{testClaim()})
		if err == nil {
			err = res[testUID].Err
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("prepare did not hold: %v", err)
	case <-time.After(3 * holdPoll):
	}
	if err := os.Remove(d.cfg.prepareHoldFile); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("prepare still held after the hold file went away")
	}
}

func TestHandleError(t *testing.T) {
	d, fatal := testDriverFor(t, nil)
	d.HandleError(context.Background(), errors.Join(errors.New("dropped fields"), kubeletplugin.ErrRecoverable), "publish")
	if len(*fatal) != 0 {
		t.Errorf("recoverable error was fatal: %v", *fatal)
	}
	d.HandleError(context.Background(), errors.New("listener closed"), "DRA gRPC server failed")
	if len(*fatal) != 1 {
		t.Errorf("fatal error: %d fatal calls, want 1", len(*fatal))
	}
}

func TestParseHealth(t *testing.T) {
	file, err := parseHealth([]byte("# comment\n\ngpu-1 unhealthy  ECC errors: 3\ngpu-9 Healthy\ngpu-0 Unknown\ngpu-0 HEALTHY\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	r := healthReport(testNode, gpuInv(3).deviceNames(testNode), file, now)
	var got []string
	for _, d := range r.Devices {
		if d.PoolName != testNode || !d.LastUpdated.Equal(now) {
			t.Errorf("device %+v", d)
		}
		got = append(got, d.DeviceName+" "+string(d.Health)+" "+d.Message)
	}
	want := []string{"gpu-0 Healthy ", "gpu-1 Unhealthy ECC errors: 3", "gpu-2 Healthy "}
	if !slices.Equal(got, want) {
		t.Errorf("report:\n got %q\nwant %q", got, want)
	}
	if !sameHealth(r, healthReport(testNode, gpuInv(3).deviceNames(testNode), file, now.Add(time.Hour))) || sameHealth(r, healthReport(testNode, gpuInv(3).deviceNames(testNode), nil, now)) {
		t.Error("sameHealth must ignore time and see health")
	}
	for _, bad := range []string{"gpu-0\n", "gpu-0 Sick\n"} {
		if _, err := parseHealth([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if f, err := readHealth(filepath.Join(t.TempDir(), "none")); err != nil || f != nil {
		t.Errorf("missing file: %v, %v", f, err)
	}
}

func TestWatchHealthStatus(t *testing.T) {
	d, _ := testDriverFor(t, nil)
	d.cfg.healthFile = filepath.Join(d.cfg.cdiRoot, "health")
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	go func() { done <- d.WatchHealthStatus(ctx, reports) }()

	next := func() string {
		t.Helper()
		select {
		case r := <-reports:
			return healthSummary(r)
		case <-time.After(5 * time.Second):
			t.Fatal("no health report")
			return ""
		}
	}
	if got := next(); got != "gpu-0=Healthy gpu-1=Healthy" {
		t.Errorf("initial report %q", got)
	}
	if err := os.WriteFile(d.cfg.healthFile, []byte("gpu-1 Unhealthy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "gpu-0=Healthy gpu-1=Unhealthy" {
		t.Errorf("after the change %q", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchHealthStatus: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchHealthStatus did not return on cancel")
	}
}
