package kubeletplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

const (
	testNode   = "node-1"
	testDriver = "gpu.example.com"
)

// The kubelet-mode tests run the plugin against client-go's fake
// clientset: the API server is on the far side of a process boundary, and
// what the plugin reads and writes there is what these tests check.

// fakeAPI is a fake clientset holding the Node, with names generated for
// created objects as the API server does.
func fakeAPI(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	client := fake.NewClientset(append([]runtime.Object{node}, objs...)...)
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceSlice)
		mu.Lock()
		defer mu.Unlock()
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
			n++
		}
		s.UID = types.UID("uid-" + s.Name)
		return false, nil, nil // the tracker stores it
	})
	return client
}

func kubeletOptions(t *testing.T, client KubeClient) Options {
	opts := testOptions(t)
	opts.API, opts.NodeName, opts.KubeClient = APIKubelet, testNode, client
	return opts
}

// kubeletAgent plays allot's node agent (or the kubelet) for a driver of
// the kubelet's API.
type kubeletAgent struct {
	reg     registerapi.RegistrationClient
	info    *registerapi.PluginInfo
	v1      drapbv1.DRAPluginClient
	v1beta1 drapbv1beta1.DRAPluginClient
}

func newKubeletAgent(t *testing.T, regSocket string) *kubeletAgent {
	t.Helper()
	a := &kubeletAgent{reg: registerapi.NewRegistrationClient(dial(t, regSocket))}
	info, err := a.reg.GetInfo(testContext(t), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	a.info = info
	conn := dial(t, info.Endpoint)
	a.v1, a.v1beta1 = drapbv1.NewDRAPluginClient(conn), drapbv1beta1.NewDRAPluginClient(conn)
	return a
}

// v1Claim is a claim allocated the seed instances ids of the test driver
// on the test node for request "gpu/large", a device of the test driver
// in another pool, a device of another driver, and opaque configuration.
func v1Claim(name, uid string, ids ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	a := &resourcev1.AllocationResult{}
	for _, id := range ids {
		a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpu/large", Driver: testDriver, Pool: testNode, Device: resourceconv.SeedDeviceName(id)})
	}
	share := types.UID("share-1")
	a.Devices.Results = append(a.Devices.Results,
		resourcev1.DeviceRequestAllocationResult{Request: "gpu/large", Driver: testDriver, Pool: "shared-gpus", Device: "gpu-7", ShareID: &share},
		resourcev1.DeviceRequestAllocationResult{Request: "net", Driver: "fabric.example.com", Pool: "rack-1", Device: "fpga-0"})
	opaque := func(source resourcev1.AllocationConfigSource, driver, params string) resourcev1.DeviceAllocationConfiguration {
		return resourcev1.DeviceAllocationConfiguration{Source: source, DeviceConfiguration: resourcev1.DeviceConfiguration{
			Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
	}
	a.Devices.Config = []resourcev1.DeviceAllocationConfiguration{
		opaque(resourcev1.AllocationConfigSourceClass, testDriver, `{"kind":"GpuClassParameters"}`),
		opaque(resourcev1.AllocationConfigSourceClaim, testDriver, `{"kind":"GpuClaimParameters"}`),
		opaque(resourcev1.AllocationConfigSourceClaim, "fabric.example.com", `{"kind":"NotForGPUs"}`),
	}
	c.Status.Allocation = a
	return c
}

// TestKubeletModeClaims walks prepare and unprepare through the kubelet's
// API, v1 and v1beta1: the plugin reads each claim and hands the driver
// the Claim allot's API would carry.
func TestKubeletModeClaims(t *testing.T) {
	unallocated := v1Claim("unallocated", "uid-unallocated")
	unallocated.Status.Allocation = nil
	otherDriver := v1Claim("other", "uid-other")
	otherDriver.Status.Allocation.Devices.Results = otherDriver.Status.Allocation.Devices.Results[2:]
	client := fakeAPI(t, v1Claim("good", "uid-good", "gpu-0", "gpu-1"), v1Claim("replaced", "uid-new", "gpu-0"), unallocated, otherDriver)

	d := &fakeDriver{model: instances("gpu-0", "gpu-1")}
	var mu sync.Mutex
	got := map[string]Claim{}
	d.prepare = func(_ context.Context, c Claim) ([]string, error) {
		mu.Lock()
		got["prepare "+c.Name] = c
		mu.Unlock()
		return []string{"example.com/gpu=" + string(c.UID)}, nil
	}
	d.unprepare = func(_ context.Context, c Claim) error {
		mu.Lock()
		got["unprepare "+c.Name] = c
		mu.Unlock()
		return nil
	}
	p := startPlugin(t, d, kubeletOptions(t, client))
	a := newKubeletAgent(t, p.RegistrationSocket())
	if a.info.Type != "DRAPlugin" || a.info.Name != testDriver || a.info.Endpoint != p.DRASocket() ||
		!slices.Equal(a.info.SupportedVersions, []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}) {
		t.Errorf("GetInfo = %v", a.info)
	}

	ctx := testContext(t)
	ref := func(name, uid string) *drapbv1.Claim { return &drapbv1.Claim{Namespace: "ns", Name: name, Uid: uid} }
	resp, err := a.v1.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		ref("good", "uid-good"), ref("missing", "uid-missing"), ref("replaced", "uid-old"), ref("unallocated", "uid-unallocated"), ref("other", "uid-other"),
	}})
	if err != nil {
		t.Fatalf("a claim's failure failed the whole call: %v", err)
	}
	if len(resp.Claims) != 5 {
		t.Errorf("%d results, want 5: %v", len(resp.Claims), resp.Claims)
	}
	good := resp.Claims["uid-good"]
	cdi := []string{"example.com/gpu=uid-good"}
	shared := "share-1"
	wantDevices := []*drapbv1.Device{
		{RequestNames: []string{"gpu"}, PoolName: testNode, DeviceName: "gpu-0", CdiDeviceIds: cdi},
		{RequestNames: []string{"gpu"}, PoolName: testNode, DeviceName: "gpu-1", CdiDeviceIds: cdi},
		{RequestNames: []string{"gpu"}, PoolName: "shared-gpus", DeviceName: "gpu-7", CdiDeviceIds: cdi, ShareId: &shared},
	}
	if good == nil || good.Error != "" || len(good.Devices) != len(wantDevices) {
		t.Fatalf("good claim: %v", good)
	}
	for i, w := range wantDevices {
		g := good.Devices[i]
		if !slices.Equal(g.RequestNames, w.RequestNames) || g.PoolName != w.PoolName || g.DeviceName != w.DeviceName ||
			!slices.Equal(g.CdiDeviceIds, w.CdiDeviceIds) || (g.ShareId == nil) != (w.ShareId == nil) || (g.ShareId != nil && *g.ShareId != *w.ShareId) {
			t.Errorf("device %d = %v, want %v", i, g, w)
		}
	}
	for uid, want := range map[string]string{
		"uid-missing":     "claim ns/missing does not exist",
		"uid-old":         "claim ns/replaced has UID uid-new, not uid-old",
		"uid-unallocated": "claim ns/unallocated is not allocated",
		"uid-other":       "claim ns/other is allocated no device of driver gpu.example.com",
	} {
		if r := resp.Claims[uid]; r == nil || !strings.Contains(r.Error, want) || len(r.Devices) > 0 {
			t.Errorf("claim %s: %v, want an error containing %q", uid, r, want)
		}
	}

	// The driver got what the node agent hands an allot driver for the
	// same claim (resourceconv.DriverHandle), and only for the good claim.
	mu.Lock()
	c, ok := got["prepare good"]
	if len(got) != 1 || !ok {
		t.Errorf("the driver was called for %v, want the good claim only", keys(got))
	}
	mu.Unlock()
	wantSD, wantData, err := resourceconv.DriverHandle(v1Claim("good", "uid-good", "gpu-0", "gpu-1").Status.Allocation, testDriver, testNode)
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "ns" || c.UID != "uid-good" || c.ResourceHandle != wantData || !jsonEqual(t, c.Structured, wantSD) {
		t.Errorf("driver got %+v (structured %s), want structured %s and data %s", c, mustJSON(t, c.Structured), mustJSON(t, wantSD), wantData)
	}
	if ids := instanceIDs(c.Structured); !slices.Equal(ids, []string{"gpu-0", "gpu-1"}) || c.Structured.NodeName != testNode ||
		string(c.Structured.VendorClaimParameters.Raw) != `{"kind":"GpuClaimParameters"}` || string(c.Structured.VendorClassParameters.Raw) != `{"kind":"GpuClassParameters"}` {
		t.Errorf("structured handle %s", mustJSON(t, c.Structured))
	}
	if !strings.Contains(c.ResourceHandle, `"gpu-7"`) || strings.Contains(c.ResourceHandle, "fpga") {
		t.Errorf("resource handle %q, want this driver's device of pool shared-gpus", c.ResourceHandle)
	}

	// v1beta1 reaches the same server.
	bresp, err := a.v1beta1.NodePrepareResources(ctx, &drapbv1beta1.NodePrepareResourcesRequest{Claims: []*drapbv1beta1.Claim{
		{Namespace: "ns", Name: "good", Uid: "uid-good"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := bresp.Claims["uid-good"]; r == nil || r.Error != "" || len(r.Devices) != 3 || r.Devices[0].DeviceName != "gpu-0" {
		t.Errorf("v1beta1 prepare: %v", r)
	}

	// Unprepare gets the reference only, also of a claim that is gone.
	uresp, err := a.v1.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{ref("good", "uid-good"), ref("missing", "uid-missing")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"uid-good", "uid-missing"} {
		if r := uresp.Claims[uid]; r == nil || r.Error != "" {
			t.Errorf("unprepare %s: %v", uid, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if u := got["unprepare good"]; u.UID != "uid-good" || u.Namespace != "ns" || u.Structured != nil || u.ResourceHandle != "" {
		t.Errorf("unprepare got %+v, want the reference only", u)
	}
	if u := got["unprepare missing"]; u.UID != "uid-missing" {
		t.Errorf("unprepare of a deleted claim got %+v", u)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func jsonEqual(t *testing.T, a, b any) bool { return mustJSON(t, a) == mustJSON(t, b) }

func instanceIDs(sd *resourcev1alpha2.StructuredResourceHandle) []string {
	if sd == nil || sd.Partitionable == nil {
		return nil
	}
	var out []string
	for _, in := range sd.Partitionable.Instances {
		out = append(out, in.ID)
	}
	return out
}

// nodeSlices lists the slices in the fake API, by name.
func nodeSlices(t *testing.T, client *fake.Clientset) []resourcev1.ResourceSlice {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b resourcev1.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// sliceDevices is "pool/generation/count:device,device" per slice.
func sliceSummary(ss []resourcev1.ResourceSlice) string {
	var parts []string
	for _, s := range ss {
		var names []string
		for _, d := range s.Spec.Devices {
			names = append(names, d.Name)
		}
		if len(names) > 3 {
			names = []string{fmt.Sprint(len(names), " devices")}
		}
		parts = append(parts, fmt.Sprintf("%s/%d/%d:%s", s.Spec.Pool.Name, s.Spec.Pool.Generation, s.Spec.Pool.ResourceSliceCount, strings.Join(names, ",")))
	}
	return strings.Join(parts, " ")
}

func waitSlices(t *testing.T, client *fake.Clientset, want string) []resourcev1.ResourceSlice {
	t.Helper()
	var got []resourcev1.ResourceSlice
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = nodeSlices(t, client)
		if sliceSummary(got) == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("slices %q, want %q", sliceSummary(got), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKubeletModePublishes checks the slices the plugin writes: the
// projection of the model, owned by the Node, in one pool named after the
// node whose generation moves as upstream's controller moves it.
func TestKubeletModePublishes(t *testing.T) {
	stale := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "stale", UID: "stale-uid"},
		Spec: resourcev1.ResourceSliceSpec{Driver: testDriver, NodeName: ptr(testNode), Pool: resourcev1.ResourcePool{Name: "old-pool", Generation: 7, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "old"}}},
	}
	otherDriver := stale.DeepCopy()
	otherDriver.Name, otherDriver.Spec.Driver = "other-driver", "other.example.com"
	client := fakeAPI(t, stale, otherDriver)

	sixteen := resource.MustParse("16Gi")
	model := resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{
		CommonAttributes: []resourcev1alpha2.AttributeGroup{{Name: "common", Attributes: []resourcev1alpha2.Attribute{
			{Name: "productName", AttributeValue: resourcev1alpha2.AttributeValue{String: ptr("ACME T1000")}},
			{Name: "runtimeVersion", AttributeValue: resourcev1alpha2.AttributeValue{Version: ptr("11.1.42")}},
		}}},
		ResourceInstances: []resourcev1alpha2.ResourceInstance{
			{Name: "gpu-0", CommonAttributesRefs: []string{"common"}, Attributes: []resourcev1alpha2.Attribute{
				{Name: "memory", AttributeValue: resourcev1alpha2.AttributeValue{Quantity: &sixteen}},
				{Name: "index", AttributeValue: resourcev1alpha2.AttributeValue{Int: ptr[int64](0)}},
				{Name: "tags", AttributeValue: resourcev1alpha2.AttributeValue{StringSlice: &[]string{"a"}}},
			}},
			{Name: "gpu-1", CommonAttributesRefs: []string{"common"}},
			{Name: "gpu-2", Health: resourcev1alpha2.InstanceUnhealthy},
		},
	}}
	d := &fakeDriver{model: model}
	opts := kubeletOptions(t, client)
	opts.ResyncPeriod = 100 * time.Millisecond
	p := startPlugin(t, d, opts)

	// The stale slice of this driver and node goes; the other driver's
	// stays; one slice of generation 8 (above the highest seen) holds the
	// healthy devices.
	got := waitSlices(t, client, "node-1/8/1:gpu-0,gpu-1 old-pool/7/1:old")
	for _, s := range got {
		if s.Spec.Driver == testDriver && s.Name == "stale" {
			t.Errorf("stale slice kept")
		}
	}
	s := got[0]
	if !strings.HasPrefix(s.Name, "node-1-gpu.example.com-") || s.Spec.Driver != testDriver || s.Spec.NodeName == nil || *s.Spec.NodeName != testNode {
		t.Errorf("slice %s: driver %s node %v", s.Name, s.Spec.Driver, s.Spec.NodeName)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].APIVersion != "v1" ||
		s.OwnerReferences[0].Name != testNode || s.OwnerReferences[0].UID != "node-uid" {
		t.Errorf("owner references %+v, want the Node", s.OwnerReferences)
	}
	gpu0 := s.Spec.Devices[0]
	if q := gpu0.Capacity["memory"]; q.Value.Cmp(sixteen) != 0 {
		t.Errorf("gpu-0 capacity %v, want memory 16Gi", gpu0.Capacity)
	}
	if a := gpu0.Attributes; a["productName"].StringValue == nil || *a["productName"].StringValue != "ACME T1000" ||
		a["runtimeVersion"].VersionValue == nil || *a["runtimeVersion"].VersionValue != "11.1.42" || a["index"].IntValue == nil || *a["index"].IntValue != 0 {
		t.Errorf("gpu-0 attributes %v", a)
	}
	if _, ok := gpu0.Attributes["tags"]; ok {
		t.Error("a list attribute was published; v1 has none while DRAListTypeAttributes is off")
	}

	// One device less: the one slice is updated in place, same generation.
	m2 := *model.Partitionable.DeepCopy()
	m2.ResourceInstances = m2.ResourceInstances[:1]
	d.setModel(resourcev1alpha2.NodeResourceModel{Partitionable: &m2})
	if err := p.PublishResources(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = waitSlices(t, client, "node-1/8/1:gpu-0 old-pool/7/1:old")
	if got[0].Name != s.Name {
		t.Errorf("slice %s replaced by %s, want an update", s.Name, got[0].Name)
	}

	// 130 devices need two slices: a new generation.
	var names []string
	for i := range 130 {
		names = append(names, fmt.Sprintf("gpu-%03d", i))
	}
	d.setModel(instances(names...))
	if err := p.PublishResources(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = waitSlices(t, client, "node-1/9/2:128 devices node-1/9/2:gpu-128,gpu-129 old-pool/7/1:old")

	// Someone deletes a slice: the resync puts it back.
	if err := client.ResourceV1().ResourceSlices().Delete(context.Background(), got[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, "node-1/10/2:128 devices node-1/10/2:gpu-128,gpu-129 old-pool/7/1:old")

	// Partitions are refused, and the slices stay as they were.
	d.setModel(resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{ResourceInstances: []resourcev1alpha2.ResourceInstance{
		{Name: "gpu-0", Partitions: []resourcev1alpha2.ResourceInstanceGroup{{Name: "halves", ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "half-0"}}}}}}}})
	if err := p.PublishResources(context.Background()); err == nil || !strings.Contains(err.Error(), "instance gpu-0 has partitions") {
		t.Errorf("partitionable model: %v, want it refused", err)
	}
	time.Sleep(300 * time.Millisecond) // resyncs
	waitSlices(t, client, "node-1/10/2:128 devices node-1/10/2:gpu-128,gpu-129 old-pool/7/1:old")

	// No devices: no slices. Stopping leaves them (there are none here).
	d.setModel(resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{}})
	if err := p.PublishResources(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, "old-pool/7/1:old")
}

func ptr[T any](v T) *T { return &v }

// TestKubeletModeRetries checks that the plugin starts without the API and
// publishes once it answers.
func TestKubeletModeRetries(t *testing.T) {
	client := fakeAPI(t)
	var mu sync.Mutex
	failing := true
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return true, nil, fmt.Errorf("connection refused")
		}
		return false, nil, nil
	})
	p := startPlugin(t, &fakeDriver{model: instances("gpu-0")}, kubeletOptions(t, client))
	time.Sleep(100 * time.Millisecond)
	if got := nodeSlices(t, client); len(got) != 0 {
		t.Fatalf("slices without the Node: %v", sliceSummary(got))
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	waitSlices(t, client, "node-1/1/1:gpu-0")
	// A registration makes the plugin check its slices at once.
	if err := client.ResourceV1().ResourceSlices().Delete(context.Background(), nodeSlices(t, client)[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a := newKubeletAgent(t, p.RegistrationSocket())
	if _, err := a.reg.NotifyRegistrationStatus(testContext(t), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, "node-1/1/1:gpu-0")
}

func TestKubeletModeStartErrors(t *testing.T) {
	client := fakeAPI(t)
	partitioned := resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{ResourceInstances: []resourcev1alpha2.ResourceInstance{
		{Name: "gpu-1", Partitions: []resourcev1alpha2.ResourceInstanceGroup{{Name: "whole", ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "gpu"}}}}}}}}
	tests := map[string]struct {
		opts  func(*Options)
		model *resourcev1alpha2.NodeResourceModel
		want  string
	}{
		"no node name":     {opts: func(o *Options) { o.NodeName = "" }, want: "options.NodeName: required with APIKubelet"},
		"bad node name":    {opts: func(o *Options) { o.NodeName = "Node_1" }, want: `options.NodeName "Node_1": must be a DNS subdomain`},
		"no client":        {opts: func(o *Options) { o.KubeClient = nil }, want: "options.KubeClient: required with APIKubelet"},
		"unknown API":      {opts: func(o *Options) { o.API = "grpc" }, want: `options.API "grpc": must be "allot" or "kubelet"`},
		"negative resync":  {opts: func(o *Options) { o.ResyncPeriod = -time.Second }, want: "options.ResyncPeriod -1s"},
		"partitions":       {model: &partitioned, want: "instance gpu-1 has partitions, which resource.k8s.io/v1 devices published in kubelet mode (APIKubelet) cannot express"},
		"device name":      {model: &resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: strings.Repeat("g", 64)}}}}, want: "not a DNS label"},
		"allot API, fine":  {opts: func(o *Options) { o.API, o.KubeClient = APIAllot, nil }, model: &partitioned},
		"empty API, fine":  {opts: func(o *Options) { o.API = "" }, model: &partitioned},
		"kubelet API fine": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := kubeletOptions(t, client)
			if tc.opts != nil {
				tc.opts(&opts)
			}
			d := &fakeDriver{model: instances("gpu-0")}
			if tc.model != nil {
				d.model = *tc.model
			}
			p, err := Start(context.Background(), d, opts)
			if err == nil {
				p.Stop()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Start: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("Start succeeded")
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
