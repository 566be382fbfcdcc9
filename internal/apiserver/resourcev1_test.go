package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// v1Client is a typed resource.k8s.io/v1 client of the test server as the
// user with token; protobuf makes it send protobuf bodies, as clients
// built for Kubernetes' own kinds may.
func v1Client(t *testing.T, token string, protobuf bool) *resourcev1client.ResourceV1Client {
	t.Helper()
	cfg := &rest.Config{Host: testSrv.URL, BearerToken: token}
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	c, err := resourcev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gpuSlice is a node-local slice of n GPUs in the shape the upstream
// example driver publishes.
func gpuSlice(name, node, driver string, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"index":         {IntValue: ptr.To(int64(i))},
				"model":         {StringValue: ptr.To("LATEST-GPU-MODEL")},
				"driverVersion": {VersionValue: ptr.To("1.0.0")},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		})
	}
	return s
}

func TestResourceV1SlicesOverProtobufAndJSON(t *testing.T) {
	ctx := context.Background()
	for _, protobuf := range []bool{false, true} {
		t.Run(fmt.Sprintf("protobuf=%v", protobuf), func(t *testing.T) {
			c := v1Client(t, "admin", protobuf).ResourceSlices()
			suffix := fmt.Sprintf("%d-%v", time.Now().UnixNano(), protobuf)
			node := "v1node-" + suffix
			in := gpuSlice("gpus-"+suffix, node, "gpu.example.com", 8)
			got, err := c.Create(ctx, in, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if len(got.Spec.Devices) != 8 || !got.Spec.Devices[7].Capacity["memory"].Value.Equal(resource.MustParse("80Gi")) ||
				*got.Spec.Devices[3].Attributes["index"].IntValue != 3 || got.ResourceVersion == "" || got.UID == "" {
				t.Fatalf("created slice comes back as %+v", got.Spec)
			}
			other := gpuSlice("other-"+suffix, "v1other-"+suffix, "gpu.example.com", 1)
			if _, err := c.Create(ctx, other, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create other: %v", err)
			}
			fpga := gpuSlice("fpga-"+suffix, node, "fpga.example.com", 1)
			if _, err := c.Create(ctx, fpga, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create fpga: %v", err)
			}

			// The field selectors kubelet plugins use.
			for sel, want := range map[string]string{
				fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, node).String():                                                            "fpga-" + suffix + ",gpus-" + suffix,
				fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", node), fields.OneTermEqualSelector("spec.driver", "gpu.example.com")).String(): "gpus-" + suffix,
				fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorPoolName, "v1other-"+suffix).String():                                               "other-" + suffix,
			} {
				list, err := c.List(ctx, metav1.ListOptions{FieldSelector: sel})
				if err != nil {
					t.Fatalf("list %s: %v", sel, err)
				}
				var names []string
				for _, s := range list.Items {
					names = append(names, s.Name)
				}
				if strings.Join(names, ",") != want {
					t.Errorf("list %s = %v, want %s", sel, names, want)
				}
			}

			got.Spec.Devices = got.Spec.Devices[:2]
			got.Spec.Pool.Generation = 2
			upd, err := c.Update(ctx, got, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if len(upd.Spec.Devices) != 2 || upd.Spec.Pool.Generation != 2 {
				t.Fatalf("updated slice: %+v", upd.Spec)
			}
			if err := c.Delete(ctx, upd.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		})
	}
}

// A v1 slice is refused with 422 naming the field when it breaks a limit
// or sets a field of a feature Kubernetes 1.37 has off; nothing is stored.
func TestResourceV1SliceRefusals(t *testing.T) {
	ctx := context.Background()
	c := v1Client(t, "admin", true).ResourceSlices()
	cases := map[string]struct {
		mutate func(s *resourcev1.ResourceSlice)
		field  string
	}{
		"too many devices": {func(s *resourcev1.ResourceSlice) {
			*s = *gpuSlice(s.Name, *s.Spec.NodeName, s.Spec.Driver, resourcev1.ResourceSliceMaxDevices+1)
		}, "spec.devices"},
		"list-typed attribute (DRAListTypeAttributes off)": {func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices[0].Attributes["cores"] = resourcev1.DeviceAttribute{IntValues: []int64{1, 2}}
		}, "spec.devices[0].attributes[cores]"},
		"bad device name": {func(s *resourcev1.ResourceSlice) { s.Spec.Devices[0].Name = "GPU_0" }, "spec.devices[0].name"},
		"no node choice":  {func(s *resourcev1.ResourceSlice) { s.Spec.NodeName = nil }, "spec"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := gpuSlice(fmt.Sprintf("refused-%d", time.Now().UnixNano()), "n-refused", "gpu.example.com", 2)
			tc.mutate(s)
			_, err := c.Create(ctx, s, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("create: %v; want 422 naming %s", err, tc.field)
			}
			if _, err := c.Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("refused slice was stored: %v", err)
			}
		})
	}
}

// Node and driver identities write only their own node-local slices;
// users write none; DeviceClasses and DeviceTaintRules are admins'.
func TestResourceV1Authorization(t *testing.T) {
	ctx := context.Background()
	suffix := fmt.Sprint(time.Now().UnixNano())
	own := gpuSlice("n1-own-"+suffix, "n1", "other.example.com", 1)
	if _, err := v1Client(t, "node1", true).ResourceSlices().Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creates its slice: %v", err)
	}
	foreign := gpuSlice("n2-"+suffix, "n2", "other.example.com", 1)
	if _, err := v1Client(t, "node1", false).ResourceSlices().Create(ctx, foreign, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node creates another node's slice: %v, want 403", err)
	}
	drv := gpuSlice("drv-"+suffix, "n7", "gpu.example.com", 1)
	if _, err := v1Client(t, "driver", true).ResourceSlices().Create(ctx, drv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("driver creates its slice: %v", err)
	}
	if _, err := v1Client(t, "user", false).ResourceSlices().Create(ctx, gpuSlice("u-"+suffix, "n1", "x.example.com", 1), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("user creates a slice: %v, want 403", err)
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-" + suffix},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.example.com"`}}}}}
	if _, err := v1Client(t, "user", true).DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("user creates a device class: %v, want 403", err)
	}
	if _, err := v1Client(t, "admin", true).DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creates a device class: %v", err)
	}
	if _, err := v1Client(t, "user", false).DeviceClasses().Get(ctx, class.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("user reads the device class: %v", err)
	}
}

// DeviceTaintRule: status is dropped on create and written through the
// status subresource.
func TestResourceV1DeviceTaintRuleStatus(t *testing.T) {
	ctx := context.Background()
	c := v1Client(t, "admin", true).DeviceTaintRules()
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("maint-%d", time.Now().UnixNano())},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
		Status: resourcev1.DeviceTaintRuleStatus{Conditions: []metav1.Condition{{Type: "EvictionInProgress", Status: metav1.ConditionFalse,
			Reason: "Forged", LastTransitionTime: metav1.Now()}}},
	}
	got, err := c.Create(ctx, rule, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(got.Status.Conditions) != 0 {
		t.Fatalf("status kept on create: %+v", got.Status)
	}
	got.Status = rule.Status
	got.Status.Conditions[0].Reason = "NoEviction"
	upd, err := c.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(upd.Status.Conditions) != 1 || upd.Status.Conditions[0].Reason != "NoEviction" {
		t.Fatalf("status after update: %+v", upd.Status)
	}
	noExec := rule.DeepCopy()
	noExec.Name += "-noexec"
	noExec.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	created, err := c.Create(ctx, noExec, metav1.CreateOptions{})
	if err != nil || created.Spec.Taint.TimeAdded == nil {
		t.Fatalf("NoExecute taint rule: %v, %+v; want it created with timeAdded", err, created)
	}
	// Changing the effect and not the time restarts the time (NoExecute
	// tolerations count from it), as in Kubernetes.
	hourAgo := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	upd.Spec.Taint.TimeAdded = &hourAgo
	if upd, err = c.Update(ctx, upd, metav1.UpdateOptions{}); err != nil || !upd.Spec.Taint.TimeAdded.Equal(&hourAgo) {
		t.Fatalf("set timeAdded: %v, %+v", err, upd)
	}
	upd.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	if upd, err = c.Update(ctx, upd, metav1.UpdateOptions{}); err != nil || !upd.Spec.Taint.TimeAdded.After(hourAgo.Add(30*time.Minute)) {
		t.Fatalf("effect changed: %v, %+v; want timeAdded restarted", err, upd)
	}
}

// Discovery prefers v1 for resource.k8s.io and still serves v1alpha2.
func TestResourceV1Discovery(t *testing.T) {
	var g metav1.APIGroup
	r := admin(t, "GET", "/apis/resource.k8s.io", nil)
	expect(t, r, 200)
	r.into(t, &g)
	// v1beta2 and v1alpha3 serve only DeviceTaintRule (versions_alias.go).
	if g.PreferredVersion.Version != "v1" || len(g.Versions) != 4 || g.Versions[3].Version != "v1alpha2" {
		t.Fatalf("resource.k8s.io group: %+v", g)
	}
	var list metav1.APIResourceList
	r = admin(t, "GET", "/apis/resource.k8s.io/v1", nil)
	expect(t, r, 200)
	r.into(t, &list)
	var names []string
	for _, res := range list.APIResources {
		names = append(names, res.Name)
	}
	for _, want := range []string{"deviceclasses", "resourceslices", "devicetaintrules", "devicetaintrules/status"} {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
			t.Errorf("v1 resources %v lack %s", names, want)
		}
	}
	// kubectl's table for slices.
	r = admin(t, "GET", "/apis/resource.k8s.io/v1/resourceslices", nil,
		"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	expect(t, r, 200, `"name":"Pool"`, `"name":"Driver"`)
	var tbl map[string]any
	if err := json.Unmarshal(r.body, &tbl); err != nil {
		t.Fatal(err)
	}
}

// A NodeResourceSlice whose leaves would be one v1 device is refused,
// naming the instance; a leaf whose v1 name is too long is stored (it is
// offered to v1alpha2 claims only).
func TestSeedSliceDeviceNameCollision(t *testing.T) {
	slice := func(name string, leaves ...resourcev1alpha2.ResourceInstance) *resourcev1alpha2.NodeResourceSlice {
		return &resourcev1alpha2.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1alpha2.NodeResourceSliceSpec{NodeName: "n-collide", DriverName: "gpu.example.com",
				NodeResourceModel: resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{ResourceInstances: leaves}}}}
	}
	parted := resourcev1alpha2.ResourceInstance{Name: "a", Partitions: []resourcev1alpha2.ResourceInstanceGroup{{Name: "b",
		ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "c"}}}}}
	clash := resourcev1alpha2.ResourceInstance{Name: "a--b--c"}
	expect(t, admin(t, "POST", "/apis/resource.k8s.io/v1alpha2/noderesourceslices", slice("collide", parted, clash)), 422,
		"spec.partitionable.resourceInstances[1].name", `\"a--b--c\"`)
	long := resourcev1alpha2.ResourceInstance{Name: strings.Repeat("x", 40), Partitions: []resourcev1alpha2.ResourceInstanceGroup{{Name: strings.Repeat("y", 30),
		ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "z"}}}}}
	expect(t, admin(t, "POST", "/apis/resource.k8s.io/v1alpha2/noderesourceslices", slice("long-names", long)), 201)
}

// TestDoublePublishingRefused: a driver publishes a node's devices through
// a NodeResourceSlice or through v1 ResourceSlices, not both: the second
// kind is refused with 409 naming the first, whichever comes first; other
// nodes and other drivers are not affected.
func TestDoublePublishingRefused(t *testing.T) {
	seed := func(name, node, driver string) *resourcev1alpha2.NodeResourceSlice {
		return &resourcev1alpha2.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1alpha2.NodeResourceSliceSpec{NodeName: node, DriverName: driver,
				NodeResourceModel: resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{
					ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "gpu-0"}}}}}}
	}
	const seedPath, v1Path = "/apis/resource.k8s.io/v1alpha2/noderesourceslices", "/apis/resource.k8s.io/v1/resourceslices"
	// The watch cache may lag a create a moment: a slice admitted before
	// it caught up is deleted and created again.
	refused := func(path, name string, obj any, want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := admin(t, "POST", path, obj)
			if r.code == 409 {
				expect(t, r, 409, want...)
				return
			}
			if r.code != 201 || time.Now().After(deadline) {
				t.Fatalf("%s: got %s, want 409", name, r)
			}
			expect(t, admin(t, "DELETE", path+"/"+name, nil), 200)
			time.Sleep(50 * time.Millisecond)
		}
	}
	expect(t, admin(t, "POST", seedPath, seed("twice-seed", "twice-a", "gpu.example.com")), 201)
	refused(v1Path, "twice-v1", gpuSlice("twice-v1", "twice-a", "gpu.example.com", 1),
		"driver gpu.example.com already publishes node twice-a through a NodeResourceSlice", "count them twice")
	expect(t, admin(t, "POST", v1Path, gpuSlice("other-node", "twice-b", "gpu.example.com", 1)), 201)
	expect(t, admin(t, "POST", v1Path, gpuSlice("other-driver", "twice-a", "nic.example.com", 1)), 201)
	refused(seedPath, "reverse", seed("reverse", "twice-b", "gpu.example.com"),
		"already publishes node twice-b through resource.k8s.io/v1 ResourceSlices")
}
