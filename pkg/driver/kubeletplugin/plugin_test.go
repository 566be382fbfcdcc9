package kubeletplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// TestNodeAgentFlow walks the whole protocol as the node agent does:
// discovery, registration, the resource stream, a batched prepare with
// mixed outcomes, unprepare and stop.
func TestNodeAgentFlow(t *testing.T) {
	d := &fakeDriver{model: instances("gpu-0")}
	var mu sync.Mutex
	var prepared []Claim
	d.prepare = func(_ context.Context, c Claim) ([]string, error) {
		mu.Lock()
		prepared = append(prepared, c)
		mu.Unlock()
		switch c.Name {
		case "broken":
			return nil, errors.New("device on fire")
		case "gone":
			return nil, fmt.Errorf("instance gpu-7: %w", ErrNotFound)
		}
		return []string{"example.com/gpu=" + c.Name}, nil
	}
	p := startPlugin(t, d, testOptions(t))

	if got, want := filepath.Base(p.RegistrationSocket()), "gpu.example.com-reg.sock"; got != want {
		t.Errorf("registration socket %s, want %s", got, want)
	}
	a := newAgent(t, p.RegistrationSocket())
	want := &registerapi.PluginInfo{Type: drapb.PluginType, Name: "gpu.example.com", Endpoint: p.DRASocket(), SupportedVersions: []string{drapb.Version}}
	if a.info.Type != want.Type || a.info.Name != want.Name || a.info.Endpoint != want.Endpoint || strings.Join(a.info.SupportedVersions, ",") != drapb.Version {
		t.Errorf("GetInfo = %v, want %v", a.info, want)
	}
	if filepath.Base(a.info.Endpoint) != DRASocketName {
		t.Errorf("endpoint %s is not PluginDir/%s", a.info.Endpoint, DRASocketName)
	}

	if ok, err := p.RegistrationStatus(); ok || err != nil {
		t.Errorf("status before notification = %v, %v; want false, nil", ok, err)
	}
	if _, err := a.reg.NotifyRegistrationStatus(testContext(t), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.RegistrationStatus(); !ok || err != nil {
		t.Errorf("status after success = %v, %v; want true, nil", ok, err)
	}

	// The stream: the current model at once, then each different one.
	ctx := testContext(t)
	stream, err := a.node.NodeListAndWatchResources(ctx, &drapb.NodeListAndWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := recvModel(t, stream); instanceNames(got) != "gpu-0" {
		t.Errorf("first model has %q, want gpu-0", instanceNames(got))
	}
	if err := p.PublishResources(ctx); err != nil { // unchanged: no message
		t.Fatal(err)
	}
	d.setModel(instances("gpu-0", "gpu-1"))
	if err := p.PublishResources(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recvModel(t, stream); instanceNames(got) != "gpu-0,gpu-1" {
		t.Errorf("second model has %q, want gpu-0,gpu-1", instanceNames(got))
	}

	resp, err := a.node.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Namespace: "ns", Name: "good", Uid: "uid-good", StructuredResourceHandle: handle(t, "gpu-0")},
		{Namespace: "ns", Name: "broken", Uid: "uid-broken"},
		{Namespace: "ns", Name: "gone", Uid: "uid-gone", StructuredResourceHandle: handle(t, "gpu-7")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Claims) != 3 {
		t.Errorf("%d results, want 3: %v", len(resp.Claims), resp.Claims)
	}
	if r := resp.Claims["uid-good"]; r == nil || r.Error != "" || strings.Join(r.CdiDevices, ",") != "example.com/gpu=good" {
		t.Errorf("good claim: %v", r)
	}
	if r := resp.Claims["uid-broken"]; r == nil || !strings.Contains(r.Error, "device on fire") || codes.Code(r.ErrorCode) == codes.NotFound || len(r.CdiDevices) > 0 {
		t.Errorf("broken claim: %v", r)
	}
	if r := resp.Claims["uid-gone"]; r == nil || codes.Code(r.ErrorCode) != codes.NotFound || !strings.Contains(r.Error, "gpu-7") {
		t.Errorf("gone claim: %v, want error_code NOT_FOUND naming gpu-7", r)
	}
	mu.Lock()
	for _, c := range prepared {
		if c.Name == "good" && (c.Structured == nil || c.Structured.Partitionable.Instances[0].ID != "gpu-0" || c.Namespace != "ns") {
			t.Errorf("driver got claim %+v, want the decoded handle", c)
		}
		if c.Name == "broken" && c.Structured != nil {
			t.Errorf("claim without a handle reached the driver with one: %+v", c.Structured)
		}
	}
	mu.Unlock()

	uresp, err := a.node.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: "ns", Name: "good", Uid: "uid-good"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := uresp.Claims["uid-good"]; r == nil || r.Error != "" {
		t.Errorf("unprepare: %v", r)
	}

	p.Stop()
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("stream after Stop: %v, want io.EOF", err)
	}
	for _, s := range []string{p.RegistrationSocket(), p.DRASocket()} {
		if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s still there after Stop: %v", s, err)
		}
	}
}

func recvModel(t *testing.T, stream interface {
	Recv() (*drapb.NodeListAndWatchResourcesResponse, error)
}) resourcev1alpha2.NodeResourceModel {
	t.Helper()
	msg, err := stream.Recv()
	if err != nil {
		t.Fatalf("receive model: %v", err)
	}
	var m resourcev1alpha2.NodeResourceModel
	if err := json.Unmarshal(msg.ResourceModel, &m); err != nil {
		t.Fatalf("decode model %s: %v", msg.ResourceModel, err)
	}
	return m
}

func instanceNames(m resourcev1alpha2.NodeResourceModel) string {
	if m.Partitionable == nil {
		return "<no partitionable model>"
	}
	var names []string
	for _, in := range m.Partitionable.ResourceInstances {
		names = append(names, in.Name)
	}
	return strings.Join(names, ",")
}

func TestRegistrationRejected(t *testing.T) {
	p := startPlugin(t, &fakeDriver{model: instances("gpu-0")}, testOptions(t))
	a := newAgent(t, p.RegistrationSocket())
	if _, err := a.reg.NotifyRegistrationStatus(testContext(t), &registerapi.RegistrationStatus{Error: "version v9 not supported"}); err != nil {
		t.Fatal(err)
	}
	ok, err := p.RegistrationStatus()
	if ok || err == nil || !strings.Contains(err.Error(), "version v9 not supported") {
		t.Errorf("RegistrationStatus = %v, %v; want false and the node agent's reason", ok, err)
	}
}

// TestClaimErrors covers failures the SDK answers on the driver's behalf.
func TestClaimErrors(t *testing.T) {
	d := &fakeDriver{model: instances("gpu-0")}
	d.prepare = func(_ context.Context, c Claim) ([]string, error) {
		switch c.Name {
		case "panics":
			panic("index out of range")
		case "bad-name":
			return []string{"not a CDI name"}, nil
		case "status":
			return nil, status.Error(codes.ResourceExhausted, "no memory left")
		}
		return nil, nil
	}
	d.unprepare = func(_ context.Context, c Claim) error {
		if c.Name == "panics" {
			panic("nil map")
		}
		return nil
	}
	p := startPlugin(t, d, testOptions(t))
	a := newAgent(t, p.RegistrationSocket())
	ctx := testContext(t)
	resp, err := a.node.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Name: "panics", Uid: "u1"},
		{Name: "malformed", Uid: "u2", StructuredResourceHandle: []byte(`{"partitionable": [`)},
		{Name: "bad-name", Uid: "u3"},
		{Name: "status", Uid: "u4"},
		{Name: "no-uid"},
		{Name: "fine", Uid: "u5"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		errContains string
		code        codes.Code
	}{
		"u1": {"driver panicked: index out of range", codes.Unknown},
		"u2": {"invalid claim u2: structured_resource_handle", codes.InvalidArgument},
		"u3": {"invalid CDI device name", codes.Unknown},
		"u4": {"no memory left", codes.ResourceExhausted},
		"":   {"invalid claim: uid: required", codes.InvalidArgument},
		"u5": {"", codes.OK},
	}
	for uid, tc := range tests {
		r := resp.Claims[uid]
		if r == nil {
			t.Errorf("claim %q: no result", uid)
			continue
		}
		if tc.errContains == "" && r.Error != "" || !strings.Contains(r.Error, tc.errContains) {
			t.Errorf("claim %q: error %q, want it to contain %q", uid, r.Error, tc.errContains)
		}
		if codes.Code(r.ErrorCode) != tc.code {
			t.Errorf("claim %q: error_code %v, want %v", uid, codes.Code(r.ErrorCode), tc.code)
		}
	}
	uresp, err := a.node.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{{Name: "panics", Uid: "u1"}, {Name: "fine", Uid: "u5"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := uresp.Claims["u1"]; r == nil || !strings.Contains(r.Error, "driver panicked: nil map") {
		t.Errorf("unprepare of a panicking claim: %v", r)
	}
	if r := uresp.Claims["u5"]; r == nil || r.Error != "" {
		t.Errorf("unprepare of a fine claim: %v", r)
	}
}

// TestConcurrency checks that claims of one request run concurrently up
// to MaxConcurrentClaims, and that a UID repeated in a request runs once.
func TestConcurrency(t *testing.T) {
	var (
		mu                  sync.Mutex
		inFlight, maxFlight int
		calls               = map[string]int{}
		release             = make(chan struct{})
	)
	d := &fakeDriver{model: instances("gpu-0")}
	d.prepare = func(_ context.Context, c Claim) ([]string, error) {
		mu.Lock()
		inFlight++
		maxFlight = max(maxFlight, inFlight)
		calls[string(c.UID)]++
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil, nil
	}
	opts := testOptions(t)
	opts.MaxConcurrentClaims = 2
	p := startPlugin(t, d, opts)
	a := newAgent(t, p.RegistrationSocket())
	var claims []*drapb.Claim
	for i := range 6 {
		claims = append(claims, &drapb.Claim{Name: fmt.Sprint("c", i), Uid: fmt.Sprint("u", i)})
	}
	claims = append(claims, &drapb.Claim{Name: "c0", Uid: "u0"})
	done := make(chan *drapb.NodePrepareResourcesResponse)
	go func() {
		resp, err := a.node.NodePrepareResources(testContext(t), &drapb.NodePrepareResourcesRequest{Claims: claims})
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	eventually(t, "two claims in flight", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight == 2
	})
	time.Sleep(50 * time.Millisecond) // room for a third to start, if the bound were broken
	close(release)
	resp := <-done
	if len(resp.Claims) != 6 {
		t.Errorf("%d results, want 6", len(resp.Claims))
	}
	mu.Lock()
	defer mu.Unlock()
	if maxFlight != 2 {
		t.Errorf("at most %d claims ran at once, want 2", maxFlight)
	}
	if calls["u0"] != 1 {
		t.Errorf("repeated claim prepared %d times, want 1", calls["u0"])
	}
}

// TestSameClaimSerialized checks that two requests for one claim never
// reach the driver at the same time.
func TestSameClaimSerialized(t *testing.T) {
	var mu sync.Mutex
	inFlight, overlap := 0, false
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	d := &fakeDriver{model: instances("gpu-0")}
	d.prepare = func(_ context.Context, c Claim) ([]string, error) {
		mu.Lock()
		inFlight++
		overlap = overlap || inFlight > 1
		mu.Unlock()
		entered <- struct{}{}
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil, nil
	}
	p := startPlugin(t, d, testOptions(t))
	a := newAgent(t, p.RegistrationSocket())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := a.node.NodePrepareResources(testContext(t), &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Name: "c", Uid: "same"}}}); err != nil {
				t.Error(err)
			}
		})
	}
	<-entered
	time.Sleep(50 * time.Millisecond) // room for the second call to enter, if it could
	close(release)
	wg.Wait()
	if overlap {
		t.Error("the driver ran two prepares of one claim at once")
	}
}

func TestStartRemovesStaleSockets(t *testing.T) {
	opts := testOptions(t)
	stale := []string{filepath.Join(opts.PluginsRegistryDir, "gpu.example.com-reg.sock"), filepath.Join(opts.PluginDir, DRASocketName)}
	for _, s := range stale {
		if err := os.MkdirAll(filepath.Dir(s), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s, []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := startPlugin(t, &fakeDriver{model: instances("gpu-0")}, opts)
	if a := newAgent(t, p.RegistrationSocket()); a.info.Name != "gpu.example.com" {
		t.Errorf("GetInfo name %q", a.info.Name)
	}
}

// TestStreamEndsOnClientCancel checks that a stream whose client went
// does not hold up Stop.
func TestStreamEndsOnClientCancel(t *testing.T) {
	opts := testOptions(t)
	opts.StopGracePeriod = time.Hour
	p := startPlugin(t, &fakeDriver{model: instances("gpu-0")}, opts)
	a := newAgent(t, p.RegistrationSocket())
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := a.node.NodeListAndWatchResources(ctx, &drapb.NodeListAndWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvModel(t, stream)
	cancel()
	stopped := make(chan struct{})
	go func() {
		p.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop waits for a stream whose client cancelled")
	}
}

func TestStartContextStops(t *testing.T) {
	opts := testOptions(t)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, &fakeDriver{model: instances("gpu-0")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	eventually(t, "the sockets to go", func() bool {
		_, err1 := os.Stat(p.RegistrationSocket())
		_, err2 := os.Stat(p.DRASocket())
		return errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist)
	})
	p.Stop() // idempotent
}

func TestPublishResourcesErrors(t *testing.T) {
	d := &fakeDriver{model: instances("gpu-0")}
	p := startPlugin(t, d, testOptions(t))
	ctx := testContext(t)
	d.setModel(instances("Not_A_Name"))
	if err := p.PublishResources(ctx); err == nil || !strings.Contains(err.Error(), "partitionable.resourceInstances[0].name") {
		t.Errorf("invalid model: %v, want an error naming partitionable.resourceInstances[0].name", err)
	}
	d.mu.Lock()
	d.enumerateErr = errors.New("bus error")
	d.mu.Unlock()
	if err := p.PublishResources(ctx); err == nil || !strings.Contains(err.Error(), "bus error") {
		t.Errorf("failed Enumerate: %v", err)
	}
	a := newAgent(t, p.RegistrationSocket())
	stream, err := a.node.NodeListAndWatchResources(ctx, &drapb.NodeListAndWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := recvModel(t, stream); instanceNames(got) != "gpu-0" {
		t.Errorf("model after failed publishes has %q, want the last good one (gpu-0)", instanceNames(got))
	}
}

func TestStartErrors(t *testing.T) {
	long := "/tmp/" + strings.Repeat("d", 110)
	tests := map[string]struct {
		opts   func(*Options)
		driver *fakeDriver
		want   string
	}{
		"no driver name":      {opts: func(o *Options) { o.DriverName = "" }, want: "options.DriverName: required"},
		"bad driver name":     {opts: func(o *Options) { o.DriverName = "GPU_vendor" }, want: "options.DriverName \"GPU_vendor\": must be a DNS subdomain"},
		"long plugin dir":     {opts: func(o *Options) { o.PluginDir = long }, want: "options.PluginDir: socket path"},
		"long registry dir":   {opts: func(o *Options) { o.PluginsRegistryDir = long }, want: "options.PluginsRegistryDir: socket path"},
		"negative claims":     {opts: func(o *Options) { o.MaxConcurrentClaims = -1 }, want: "options.MaxConcurrentClaims -1"},
		"negative grace":      {opts: func(o *Options) { o.StopGracePeriod = -time.Second }, want: "options.StopGracePeriod -1s"},
		"empty model":         {driver: &fakeDriver{}, want: "partitionable"},
		"failing enumeration": {driver: &fakeDriver{enumerateErr: errors.New("no PCI bus")}, want: "no PCI bus"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := testOptions(t)
			if tc.opts != nil {
				tc.opts(&opts)
			}
			d := tc.driver
			if d == nil {
				d = &fakeDriver{model: instances("gpu-0")}
			}
			p, err := Start(context.Background(), d, opts)
			if err == nil {
				p.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRelativeDirsBecomeAbsolute(t *testing.T) {
	dir := socketDir(t)
	t.Chdir(dir)
	opts := testOptions(t)
	opts.PluginsRegistryDir, opts.PluginDir = "reg", "./plugins/../gpu"
	p := startPlugin(t, &fakeDriver{model: instances("gpu-0")}, opts)
	a := newAgent(t, filepath.Join(dir, "reg", "gpu.example.com-reg.sock"))
	if want := filepath.Join(dir, "gpu", DRASocketName); a.info.Endpoint != want {
		t.Errorf("endpoint %q, want %q", a.info.Endpoint, want)
	}
	if p.RegistrationSocket() != filepath.Join(dir, "reg", "gpu.example.com-reg.sock") {
		t.Errorf("registration socket %q", p.RegistrationSocket())
	}
}

func TestDefaults(t *testing.T) {
	o, err := Options{DriverName: "gpu.example.com"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if o.PluginsRegistryDir != drapb.DefaultPluginsRegistryDir || o.PluginDir != filepath.Join(drapb.DefaultPluginsDir, "gpu.example.com") ||
		o.MaxConcurrentClaims != DefaultMaxConcurrentClaims || o.StopGracePeriod != DefaultStopGracePeriod || o.Logger == nil {
		t.Errorf("defaults: %+v", o)
	}
}
