package gpudriver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestPublishV1 runs the driver with --publish=v1 against a fake API
// server: it registers for the kubelet's DRA API, publishes the built-in
// v1 model as the node's ResourceSlice, and prepares a v1 claim it reads
// from the API exactly as it prepares the same allocation through allot's
// API: the same CDI device, env and vendor parameters.
func TestPublishV1(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "v1", UID: "uid-v1"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: DriverName, Pool: "node-1", Device: "gpu-1"}},
			Config: []resourcev1.DeviceAllocationConfiguration{{Source: resourcev1.AllocationConfigSourceClaim,
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: DriverName,
					Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.example.com/v1alpha1","kind":"GpuClaimParameters","spec":{"sharing":{"strategy":"MPS"}}}`)}}}}},
		}}},
	}
	client := fake.NewClientset(node, claim)
	client.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceSlice)
		s.Name = s.GenerateName + "x"
		return false, nil, nil
	})

	cfg := testConfig(t)
	cfg.Publish, cfg.NodeName, cfg.KubeClient = PublishV1, "node-1", client
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	regSock := filepath.Join(cfg.PluginsRegistryDir, DriverName+"-reg.sock")
	eventually(t, "the registration socket", func() bool { _, err := os.Stat(regSock); return err == nil })
	info, err := registerapi.NewRegistrationClient(dial(t, regSock)).GetInfo(testContext(t), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.SupportedVersions, []string{drapbv1.DRAPluginService, "v1beta1.DRAPlugin"}) {
		t.Errorf("GetInfo versions %q, want the kubelet's", info.SupportedVersions)
	}

	var slice resourcev1.ResourceSlice
	eventually(t, "the node's ResourceSlice", func() bool {
		list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		slice = list.Items[0]
		return true
	})
	var names []string
	for _, d := range slice.Spec.Devices {
		names = append(names, d.Name)
	}
	if slice.Spec.Pool.Name != "node-1" || !slices.Equal(names, []string{"gpu-0", "gpu-1"}) {
		t.Fatalf("slice pool %s devices %q, want node-1 with gpu-0 and gpu-1", slice.Spec.Pool.Name, names)
	}
	mem := slice.Spec.Devices[1].Capacity["memory"].Value
	if mem.String() != "32Gi" || *slice.Spec.Devices[1].Attributes["productName"].StringValue != "ACME A4-PCIE-40GB" {
		t.Errorf("gpu-1: capacity %v, attributes %v", slice.Spec.Devices[1].Capacity, slice.Spec.Devices[1].Attributes)
	}

	kc := drapbv1.NewDRAPluginClient(dial(t, info.Endpoint))
	resp, err := kc.NodePrepareResources(testContext(t), &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: "default", Name: "v1", Uid: "uid-v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Claims["uid-v1"]
	want := "gpu.example.com/gpu=uid-v1"
	if r == nil || r.Error != "" || len(r.Devices) != 1 || r.Devices[0].DeviceName != "gpu-1" || r.Devices[0].PoolName != "node-1" ||
		!slices.Equal(r.Devices[0].CdiDeviceIds, []string{want}) {
		t.Fatalf("prepare: %v", r)
	}
	env, nodes := injected(t, cfg.CDIDir, want)
	for _, e := range []string{"GPU_DEVICE_IDS=gpu-1", "GPU_CLAIM=default/v1", "GPU_SHARING_STRATEGY=MPS"} {
		if !slices.Contains(env, e) {
			t.Errorf("container env %v lacks %s", env, e)
		}
	}
	if !slices.Equal(nodes, []string{"/dev/gpu-example-1"}) {
		t.Errorf("device nodes %v", nodes)
	}
	uresp, err := kc.NodeUnprepareResources(testContext(t), &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{
		{Namespace: "default", Name: "v1", Uid: "uid-v1"}}})
	if err != nil || uresp.Claims["uid-v1"] == nil || uresp.Claims["uid-v1"].Error != "" {
		t.Fatalf("unprepare: %v, %v", uresp, err)
	}
	wantState := []string{"prepare uid-v1 default/v1 gpu-1", "unprepare uid-v1 default/v1"}
	if got := stateLines(t, cfg.StateFile); !slices.Equal(got, wantState) {
		t.Errorf("state file %q, want %q", got, wantState)
	}
}

// TestPublishV1Refusals: the partitionable default model cannot be
// published as v1 devices, and --publish takes two values.
func TestPublishV1Refusals(t *testing.T) {
	client := fake.NewClientset()
	cfg := testConfig(t)
	cfg.Publish, cfg.NodeName, cfg.KubeClient = PublishV1, "node-1", client
	cfg.ModelFile = filepath.Join(t.TempDir(), "model.yaml")
	if err := os.WriteFile(cfg.ModelFile, defaultModel, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "instance partitionable-gpu-1 has partitions") {
		t.Errorf("Run with a partitionable model and --publish=v1: %v", err)
	}
	cfg = testConfig(t)
	cfg.Publish = "v2"
	if err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `--publish "v2": must be "seed" or "v1"`) {
		t.Errorf("Run with --publish=v2: %v", err)
	}
}

func TestDefaultNodeName(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	host := func(h string) func() (string, error) { return func() (string, error) { return h, nil } }
	for _, tc := range []struct {
		env, host, want string
	}{
		{"from-env", "host", "from-env"},
		{"", "My_Host.Example", "myhost.example"},
		{"", "__", "node"},
	} {
		if got := defaultNodeName(env(tc.env), host(tc.host)); got != tc.want {
			t.Errorf("defaultNodeName(env %q, host %q) = %q, want %q", tc.env, tc.host, got, tc.want)
		}
	}
}
