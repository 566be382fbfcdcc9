package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestLibrary runs the driver inside the unmodified library against a fake
// clientset, and talks to its sockets as the node agent would: GetInfo,
// NodePrepareResources, NodeUnprepareResources, NodeWatchResources, and
// the published ResourceSlice.
func TestLibrary(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseFlags([]string{
		"--node-name=" + testNode,
		"--kubelet-registrar-directory-path=" + filepath.Join(dir, "reg"),
		"--kubelet-plugins-directory-path=" + filepath.Join(dir, "plugins"),
		"--cdi-root=" + filepath.Join(dir, "cdi"),
		"--state-file=" + filepath.Join(dir, "state"),
		"--health-file=" + filepath.Join(dir, "health"),
	}, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.healthFile, []byte("gpu-1 Unhealthy\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	client := fake.NewClientset(node, testClaim())
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" {
			mu.Lock()
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, n)
			n++
			mu.Unlock()
		}
		return false, nil, nil // the tracker stores it
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fatal []error
	d := &driver{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), fatal: func(err error) { fatal = append(fatal, err) }}
	helper, err := start(ctx, cfg, d, client)
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Stop()
	if err := publish(ctx, cfg, helper); err != nil {
		t.Fatal(err)
	}

	// Registration: what the library advertises.
	reg := registerapi.NewRegistrationClient(dial(t, cfg.registrationSocket()))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantVersions := []string{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"}
	if info.Type != "DRAPlugin" || info.Name != testDriver || info.Endpoint != cfg.draSocket() || !slices.Equal(info.SupportedVersions, wantVersions) {
		t.Errorf("GetInfo %+v; want DRAPlugin %s at %s with %v", info, testDriver, cfg.draSocket(), wantVersions)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if st := helper.RegistrationStatus(); st == nil || !st.PluginRegistered {
		t.Errorf("RegistrationStatus %v", st)
	}

	// Prepare and unprepare over the v1 DRA service.
	conn := dial(t, info.Endpoint)
	dra := drapbv1.NewDRAPluginClient(conn)
	claim := &drapbv1.Claim{Namespace: "ns", Name: "claim", Uid: string(testUID)}
	prep, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
	if err != nil {
		t.Fatal(err)
	}
	r := prep.Claims[string(testUID)]
	if r == nil || r.Error != "" || len(r.Devices) != 2 {
		t.Fatalf("prepare: %v", prep)
	}
	if got := r.Devices[1]; !slices.Equal(got.RequestNames, []string{"b"}) || got.DeviceName != "gpu-1" ||
		!slices.Equal(got.CdiDeviceIds, []string{"upstream.example.com/gpu=" + string(testUID) + "-gpu-1"}) {
		t.Errorf("device b: %v (the library strips the subrequest name)", got)
	}
	if _, err := os.Stat(specPath(cfg.cdiRoot, testDriver, testUID)); err != nil {
		t.Error(err)
	}
	unprep, err := dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
	if err != nil || unprep.Claims[string(testUID)] == nil || unprep.Claims[string(testUID)].Error != "" {
		t.Fatalf("unprepare: %v, %v", unprep, err)
	}
	if got := readLines(t, cfg.stateFile); !slices.Equal(got, []string{"prepare " + string(testUID) + " gpu-0,gpu-1", "unprepare " + string(testUID)}) {
		t.Errorf("state file %q", got)
	}

	// Health over the v1 health service.
	stream, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var health []string
	for _, h := range msg.Devices {
		health = append(health, h.Device.PoolName+"/"+h.Device.DeviceName+"="+h.Health.String())
	}
	if want := []string{testNode + "/gpu-0=HEALTHY", testNode + "/gpu-1=UNHEALTHY"}; !slices.Equal(health, want) {
		t.Errorf("health %v, want %v", health, want)
	}

	// The published slice.
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			s := list.Items[0].Spec
			if s.Driver != testDriver || s.Pool.Name != testNode || s.NodeName == nil || *s.NodeName != testNode || len(s.Devices) != 2 {
				t.Errorf("slice %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slices published, want 1", len(list.Items))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(fatal) != 0 {
		t.Errorf("fatal errors: %v", fatal)
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
