package dra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/examples/gpu-driver/gpudriver"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/pkg/client"
)

const fabricDriver = "fabric.example.com"

// The vendor parameters of the example gpu driver, as it reads them from
// vendorClaimParameters and vendorClassParameters.
var (
	gpuClaimParams = gpudriver.GpuClaimParameters{
		TypeMeta: metav1.TypeMeta{APIVersion: gpudriver.ParametersAPIVersion, Kind: gpudriver.ClaimParametersKind},
		Spec:     gpudriver.GpuClaimParametersSpec{Sharing: &gpudriver.GpuSharing{Strategy: "TimeSliced"}},
	}
	gpuClassParams = gpudriver.GpuClassParameters{
		TypeMeta:    metav1.TypeMeta{APIVersion: gpudriver.ParametersAPIVersion, Kind: gpudriver.ClassParametersKind},
		InitCommand: []string{"/bin/true", "init"},
	}
)

func rawJSON(t testing.TB, v any) runtime.RawExtension {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// opaqueConfig is one entry of an allocation's devices.config.
func opaqueConfig(t testing.TB, source resourcev1.AllocationConfigSource, driver string, requests []string, params any) resourcev1.DeviceAllocationConfiguration {
	return resourcev1.DeviceAllocationConfiguration{Source: source, Requests: requests, DeviceConfiguration: resourcev1.DeviceConfiguration{
		Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: driver, Parameters: rawJSON(t, params)}}}
}

// seedResult is a result of request for the seed instance id of driver on
// node, as the scheduler allocates a seed-projected device.
func seedResult(request, driver, node, id string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: node, Device: resourceconv.SeedDeviceName(id)}
}

// onNode is the node selector of node-local allocations.
func onNode(node string) *kcorev1.NodeSelector {
	return &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}

// gpuAllocation is a v1 allocation of seed instances of the gpu driver on
// node for request "gpu", with the gpu driver's class and claim
// configuration and configuration of other drivers that must not reach it.
func gpuAllocation(t testing.TB, node string, ids ...string) *resourcev1.AllocationResult {
	a := &resourcev1.AllocationResult{NodeSelector: onNode(node)}
	for _, id := range ids {
		a.Devices.Results = append(a.Devices.Results, seedResult("gpu", gpuDriver, node, id))
	}
	a.Devices.Config = []resourcev1.DeviceAllocationConfiguration{
		opaqueConfig(t, resourcev1.AllocationConfigSourceClass, gpuDriver, nil, gpuClassParams),
		opaqueConfig(t, resourcev1.AllocationConfigSourceClaim, fabricDriver, nil, map[string]any{"apiVersion": "fabric.example.com/v1", "kind": "Other"}),
		opaqueConfig(t, resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"gpu"}, gpuClaimParams),
	}
	return a
}

// structuredOf decodes the structured handle a driver got, as the driver
// SDK does.
func structuredOf(t testing.TB, c *drapb.Claim) resourcev1alpha2.StructuredResourceHandle {
	t.Helper()
	var h resourcev1alpha2.StructuredResourceHandle
	if err := json.Unmarshal(c.GetStructuredResourceHandle(), &h); err != nil {
		t.Fatalf("structured handle of %s: %v (%s)", c.GetName(), err, c.GetStructuredResourceHandle())
	}
	return h
}

func instanceList(h resourcev1alpha2.StructuredResourceHandle) []string {
	if h.Partitionable == nil {
		return nil
	}
	var out []string
	for _, in := range h.Partitionable.Instances {
		out = append(out, in.ID)
	}
	return out
}

// gpuParamsOf reads the vendor parameters as the example gpu driver does
// (decodeVendor: the object with its apiVersion and kind checked): the
// sharing strategy and the init command.
func gpuParamsOf(t testing.TB, h resourcev1alpha2.StructuredResourceHandle) (strategy string, initCommand []string) {
	t.Helper()
	if h.VendorClaimParameters == nil || h.VendorClassParameters == nil {
		t.Fatalf("vendor parameters missing: claim %v, class %v", h.VendorClaimParameters, h.VendorClassParameters)
	}
	var cp gpudriver.GpuClaimParameters
	if err := json.Unmarshal(h.VendorClaimParameters.Raw, &cp); err != nil || cp.APIVersion != gpudriver.ParametersAPIVersion ||
		cp.Kind != gpudriver.ClaimParametersKind || cp.Spec.Sharing == nil {
		t.Fatalf("vendorClaimParameters %s: %v, want a %s", h.VendorClaimParameters.Raw, err, gpudriver.ClaimParametersKind)
	}
	var cl gpudriver.GpuClassParameters
	if err := json.Unmarshal(h.VendorClassParameters.Raw, &cl); err != nil || cl.APIVersion != gpudriver.ParametersAPIVersion ||
		cl.Kind != gpudriver.ClassParametersKind {
		t.Fatalf("vendorClassParameters %s: %v, want a %s", h.VendorClassParameters.Raw, err, gpudriver.ClassParametersKind)
	}
	return cp.Spec.Sharing.Strategy, cl.InitCommand
}

// TestV1Form pins how a v1 claim's allocation becomes the handles the
// drivers get (no cluster needed).
func TestV1Form(t *testing.T) {
	const node = "node-1"
	claim := func(a *resourcev1.AllocationResult) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1"},
			Status: resourcev1.ResourceClaimStatus{Allocation: a, ReservedFor: []resourcev1.ResourceClaimConsumerReference{
				{Resource: "pods", Name: "p", UID: "pod-uid"}}},
		}
	}
	handleOf := func(t *testing.T, form *resourcev1alpha2.ResourceClaim, driver string) resourcev1alpha2.ResourceHandle {
		t.Helper()
		for _, rh := range form.Status.Allocation.ResourceHandles {
			if rh.DriverName == driver {
				return rh
			}
		}
		t.Fatalf("no handle of %s in %+v", driver, form.Status.Allocation.ResourceHandles)
		return resourcev1alpha2.ResourceHandle{}
	}

	t.Run("seed devices and configuration", func(t *testing.T) {
		a := gpuAllocation(t, node, "gpu-0", "gpu-1/halves/half-0", "gpu-0")
		form, problem := v1Form(claim(a), node, nil)
		if problem != "" {
			t.Fatal(problem)
		}
		if form.UID != "uid-1" || form.Namespace != "ns" || form.Name != "c" || !reservedFor(form, "pod-uid") ||
			form.Status.Allocation.AvailableOnNodes == nil || !form.Status.Allocation.AvailableOnNodes.Matches(node, nil) ||
			form.Status.Allocation.AvailableOnNodes.Matches("node-2", nil) {
			t.Fatalf("form %+v", form)
		}
		handles, problem := claimHandles(form, versionV1)
		if problem != "" || len(handles) != 1 || handles[0].driver != gpuDriver || handles[0].data != "" {
			t.Fatalf("handles %+v, %q: want one of %s without data (the fabric driver has configuration, no devices)", handles, problem, gpuDriver)
		}
		// Exactly the handle allot's scheduler writes for a v1alpha2 claim
		// (pkg/allocator): node, instances, vendor snapshots.
		want, err := json.Marshal(resourcev1alpha2.StructuredResourceHandle{
			VendorClassParameters: &runtime.RawExtension{Raw: rawJSON(t, gpuClassParams).Raw},
			VendorClaimParameters: &runtime.RawExtension{Raw: rawJSON(t, gpuClaimParams).Raw},
			NodeName:              node,
			Partitionable: &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{
				{ID: "gpu-0"}, {ID: "gpu-1/halves/half-0"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(handles[0].structured) != string(want) {
			t.Fatalf("structured handle\n%s\nwant\n%s", handles[0].structured, want)
		}
	})

	t.Run("network-attached devices go in the handle's data", func(t *testing.T) {
		a := gpuAllocation(t, node, "gpu-0")
		nic := resourcev1.DeviceRequestAllocationResult{Request: "fpga", Driver: fabricDriver, Pool: "rack-1", Device: "fpga-0"}
		remoteGPU := resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuDriver, Pool: "shared-gpus", Device: "gpu-7"}
		a.Devices.Results = append(a.Devices.Results, nic, remoteGPU)
		form, problem := v1Form(claim(a), node, nil)
		if problem != "" {
			t.Fatal(problem)
		}
		fabric := handleOf(t, form, fabricDriver)
		var data resourceconv.V1HandleData
		if err := json.Unmarshal([]byte(fabric.Data), &data); err != nil || len(data.Devices) != 1 || !reflect.DeepEqual(data.Devices[0], nic) {
			t.Fatalf("fabric data %q (%v), want its result", fabric.Data, err)
		}
		if sd := fabric.StructuredData; sd.NodeName != "" || len(instanceList(*sd)) != 0 ||
			sd.VendorClaimParameters == nil || !strings.Contains(string(sd.VendorClaimParameters.Raw), `"Other"`) || sd.VendorClassParameters != nil {
			t.Fatalf("fabric structured %+v: want no node, no instances, its own claim configuration", sd)
		}
		gpu := handleOf(t, form, gpuDriver)
		data = resourceconv.V1HandleData{}
		if err := json.Unmarshal([]byte(gpu.Data), &data); err != nil || len(data.Devices) != 1 || !reflect.DeepEqual(data.Devices[0], remoteGPU) {
			t.Fatalf("gpu data %q (%v), want the device of pool shared-gpus", gpu.Data, err)
		}
		if got := instanceList(*gpu.StructuredData); !slices.Equal(got, []string{"gpu-0"}) || gpu.StructuredData.NodeName != node {
			t.Fatalf("gpu instances %q on %q", got, gpu.StructuredData.NodeName)
		}
	})

	t.Run("the last entry that applies wins; subrequests take their request's", func(t *testing.T) {
		a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{seedResult("gpu/large", gpuDriver, node, "gpu-0")},
			Config: []resourcev1.DeviceAllocationConfiguration{
				opaqueConfig(t, resourcev1.AllocationConfigSourceClaim, gpuDriver, nil, map[string]string{"n": "first"}),
				opaqueConfig(t, resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"gpu"}, map[string]string{"n": "second"}),
				opaqueConfig(t, resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"other"}, map[string]string{"n": "not mine"}),
				opaqueConfig(t, resourcev1.AllocationConfigSourceClass, gpuDriver, []string{"gpu/small"}, map[string]string{"n": "other subrequest"}),
			},
		}}
		form, problem := v1Form(claim(a), node, nil)
		if problem != "" {
			t.Fatal(problem)
		}
		sd := handleOf(t, form, gpuDriver).StructuredData
		if sd.VendorClaimParameters == nil || string(sd.VendorClaimParameters.Raw) != `{"n":"second"}` || sd.VendorClassParameters != nil {
			t.Fatalf("parameters claim %v class %v", sd.VendorClaimParameters, sd.VendorClassParameters)
		}
	})

	t.Run("requests must agree on the configuration", func(t *testing.T) {
		a := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{seedResult("a", gpuDriver, node, "gpu-0"), seedResult("b", gpuDriver, node, "gpu-1")},
			Config: []resourcev1.DeviceAllocationConfiguration{
				{Source: resourcev1.AllocationConfigSourceClass, Requests: []string{"a"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
					Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: gpuDriver, Parameters: runtime.RawExtension{Raw: []byte(`{"x":1,"y":2}`)}}}},
				{Source: resourcev1.AllocationConfigSourceClass, Requests: []string{"b"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
					Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: gpuDriver, Parameters: runtime.RawExtension{Raw: []byte(`{ "y": 2, "x": 1 }`)}}}},
			},
		}}
		if _, problem := v1Form(claim(a), node, nil); problem != "" {
			t.Fatalf("the same class configuration for both requests: %s", problem)
		}
		a.Devices.Config = append(a.Devices.Config, opaqueConfig(t, resourcev1.AllocationConfigSourceClaim, gpuDriver, []string{"a"}, map[string]string{"only": "a"}))
		form, problem := v1Form(claim(a), node, nil)
		if form != nil || !strings.Contains(problem, `opaque configuration from its claim for driver `+gpuDriver+` that differs between requests "a" and "b"`) {
			t.Fatalf("problem %q, want the disagreement named", problem)
		}
	})

	t.Run("unallocated, and allocated without devices", func(t *testing.T) {
		form, problem := v1Form(claim(nil), node, nil)
		if problem != "" || form.Status.Allocation != nil || !reservedFor(form, "pod-uid") {
			t.Fatalf("form of an unallocated claim %+v, %q", form, problem)
		}
		form, problem = v1Form(claim(&resourcev1.AllocationResult{}), node, nil)
		if problem != "" || form.Status.Allocation == nil {
			t.Fatalf("form of an empty allocation %+v, %q", form, problem)
		}
		if handles, problem := claimHandles(form, versionV1); problem != "" || len(handles) != 0 {
			t.Fatalf("handles of an empty v1 allocation %+v, %q: want none, no driver to call", handles, problem)
		}
	})
}

// fenceRevs is the revision of each test node's last binding: a binding
// fences (node, driver) with a revision no older than the last structured
// allocation there.
var fenceRevs sync.Map

// v1Claim creates a v1 claim with one exact request per name, of the
// device class of the same name's driver (gpu → gpu.example.com).
func (e *env) v1Claim(name string, requests ...string) *resourcev1.ResourceClaim {
	e.t.Helper()
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, r := range requests {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: r,
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r + ".example.com", AllocationMode: resourcev1.DeviceAllocationModeAll}})
	}
	out, err := e.admin.ResourceClaimsV1(e.ns).Create(callCtx(e.t), c)
	if err != nil {
		e.t.Fatalf("create v1 claim %s: %v", name, err)
	}
	return out
}

// unboundPod creates a pod, not yet on a node, whose container uses the
// claims (entry name = claim name).
func (e *env) unboundPod(name string, claims ...string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: &c})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c})
	}
	out, err := e.admin.Pods(e.ns).Create(callCtx(e.t), p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

// allocV1 is a binding's entry allocating a v1 claim.
func allocV1(t testing.TB, claim string, a *resourcev1.AllocationResult) corev1.BindingResourceClaim {
	return corev1.BindingResourceClaim{Name: claim, Allocation: &runtime.RawExtension{Raw: rawJSON(t, a).Raw}}
}

// bind binds pod to this node as the scheduler does: one pods/binding
// write with the claims' allocations and reservations, fenced for every
// driver that gets devices.
func (e *env) bind(pod *corev1.Pod, drivers []string, claims ...corev1.BindingResourceClaim) *corev1.Pod {
	e.t.Helper()
	return e.bindExtended(pod, drivers, nil, claims...)
}

// bindExtended is bind that also records the claim of the pod's extended
// resources (ext), as the scheduler's binding does.
func (e *env) bindExtended(pod *corev1.Pod, drivers []string, ext *corev1.PodExtendedResourceClaimStatus, claims ...corev1.BindingResourceClaim) *corev1.Pod {
	e.t.Helper()
	rev, _ := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	if last, ok := fenceRevs.Load(e.node); ok {
		rev = max(rev, last.(int64))
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: e.node}, ResourceClaims: claims,
		ExtendedResourceClaimStatus: ext}
	for _, d := range drivers {
		b.AllocationFences = append(b.AllocationFences, corev1.AllocationFence{NodeName: e.node, DriverName: d, Revision: strconv.FormatInt(rev, 10)})
	}
	committed, err := e.admin.Bind(callCtx(e.t), e.ns, pod.Name, b)
	if err != nil {
		e.t.Fatalf("bind pod %s: %v", pod.Name, err)
	}
	if r, err := strconv.ParseInt(committed, 10, 64); err == nil {
		fenceRevs.Store(e.node, r)
	}
	out, err := e.admin.Pods(e.ns).Get(callCtx(e.t), pod.Name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", pod.Name, err)
	}
	return out
}

// v1Pod creates a v1 claim with request "gpu", and a pod bound with it
// allocated on the gpu driver's seed instances ids of this node.
func (e *env) v1Pod(pod, claim string, ids ...string) *corev1.Pod {
	e.t.Helper()
	e.v1Claim(claim, "gpu")
	return e.bind(e.unboundPod(pod, claim), []string{gpuDriver}, allocV1(e.t, claim, gpuAllocation(e.t, e.node, ids...)))
}

// record returns the checkpoint record of the claim named name.
func record(t *testing.T, m *Manager, name string) claimRecord {
	t.Helper()
	for _, rec := range m.store.snapshot() {
		if rec.Name == name {
			return rec
		}
	}
	t.Fatalf("no record of claim %s", name)
	return claimRecord{}
}

// A pod bound with a v1 claim allocated on seed-projected devices: the
// driver gets the claim as it would an equivalent v1alpha2 claim
// (instance IDs mapped back, opaque configuration as vendor parameters),
// its health is reported by instance, and the pod's deletion unprepares it
// with the same handle.
func TestV1ClaimPreparedOnSeedDevices(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver, func(o *dratest.Options) { o.Model = gpuModel("") })
	pod := e.v1Pod("p", "gpu", "gpu-0", "gpu-1/halves/half-0")
	wantAdmitted(t, admit(t, m, pod))

	claim, err := e.admin.ResourceClaimsV1(e.ns).Get(callCtx(t), "gpu")
	if err != nil || resourcev1alpha2.IsView(claim) {
		t.Fatalf("get v1 claim: %v (view: %v)", err, claim != nil && resourcev1alpha2.IsView(claim))
	}
	calls := p.Prepared()
	if len(calls) != 1 || len(calls[0]) != 1 {
		t.Fatalf("prepare calls %v, want one with the claim", claimNames(calls))
	}
	c := calls[0][0]
	if c.GetNamespace() != e.ns || c.GetName() != "gpu" || c.GetUid() != string(claim.UID) || c.GetResourceHandle() != "" {
		t.Fatalf("prepared claim %+v", c)
	}
	h := structuredOf(t, c)
	if got := instanceList(h); h.NodeName != e.node || !slices.Equal(got, []string{"gpu-0", "gpu-1/halves/half-0"}) {
		t.Fatalf("structured handle node %q instances %q, want %s and the seed instance IDs", h.NodeName, got, e.node)
	}
	strategy, initCmd := gpuParamsOf(t, h)
	if strategy != "TimeSliced" || !slices.Equal(initCmd, gpuClassParams.InitCommand) {
		t.Fatalf("the gpu driver would read strategy %q and init command %q", strategy, initCmd)
	}
	if got := containerDevices(t, m, pod); !slices.Equal(got, []string{dratest.DeviceFor("gpu")}) {
		t.Fatalf("CDI devices %q", got)
	}
	if rec := record(t, m, "gpu"); rec.Version != "resource.k8s.io/v1" || rec.UID != claim.UID {
		t.Fatalf("record %+v, want the v1 claim's version and UID", rec)
	}
	health := "claim:gpu gpu.example.com/gpu-0 Healthy; claim:gpu gpu.example.com/gpu-1/halves/half-0 Healthy"
	eventually(t, "health by instance", func() (bool, string) {
		got := healthString(m.AllocatedResourcesStatus(pod, "main"))
		return got == health, got
	})

	// The pod is deleted: its worker releases it.
	if err := e.admin.Pods(e.ns).Delete(callCtx(t), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release: %v", err)
	}
	un := p.Unprepared()
	if len(un) != 1 || len(un[0]) != 1 || un[0][0].GetUid() != string(claim.UID) ||
		string(un[0][0].GetStructuredResourceHandle()) != string(c.GetStructuredResourceHandle()) {
		t.Fatalf("unprepare calls %v, want one with the handle sent to prepare", un)
	}
	if cond := e.unpreparedCondition("p"); cond == nil || cond.Status != corev1.ConditionTrue {
		t.Fatalf("condition %+v", cond)
	}
	if n := m.store.count(); n != 0 {
		t.Fatalf("%d claims still recorded", n)
	}
}

// A pod with one v1alpha2 and one v1 claim of the same driver, both
// allocated by one binding: one prepare call with both, the same form of
// handle for both, and one unprepare call.
func TestPodWithV1alpha2AndV1Claims(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	e.claim("old")
	e.v1Claim("new", "gpu")
	pod := e.unboundPod("p", "old", "new")
	oldAlloc := resourcev1alpha2.AllocationResult{
		AvailableOnNodes: nodeSelector("dra-test", "yes"),
		ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: gpuDriver, StructuredData: &resourcev1alpha2.StructuredResourceHandle{
			VendorClassParameters: &runtime.RawExtension{Raw: rawJSON(t, gpuClassParams).Raw},
			VendorClaimParameters: &runtime.RawExtension{Raw: rawJSON(t, gpuClaimParams).Raw},
			NodeName:              e.node,
			Partitionable:         &resourcev1alpha2.PartitionableAllocationResult{Instances: []resourcev1alpha2.AllocatedResourceInstance{{ID: "gpu-0"}}},
		}}},
	}
	pod = e.bind(pod, []string{gpuDriver},
		corev1.BindingResourceClaim{Name: "old", DriverName: gpuDriver, Allocation: &runtime.RawExtension{Raw: rawJSON(t, oldAlloc).Raw}},
		allocV1(t, "new", gpuAllocation(t, e.node, "gpu-1/halves/half-1")))
	wantAdmitted(t, admit(t, m, pod))

	calls := p.Prepared()
	if got := claimNames(calls); !slices.EqualFunc(got, [][]string{{"new", "old"}}, slices.Equal) {
		t.Fatalf("prepare calls %v, want one with both claims", got)
	}
	byName := map[string]*drapb.Claim{}
	for _, c := range calls[0] {
		byName[c.GetName()] = c
	}
	oldH, newH := structuredOf(t, byName["old"]), structuredOf(t, byName["new"])
	if got := instanceList(newH); !slices.Equal(got, []string{"gpu-1/halves/half-1"}) {
		t.Fatalf("v1 claim's instances %q", got)
	}
	newH.Partitionable = oldH.Partitionable
	if a, b := rawJSON(t, oldH), rawJSON(t, newH); string(a.Raw) != string(b.Raw) {
		t.Fatalf("handles differ beyond their instances:\nv1alpha2 %s\nv1       %s", a.Raw, b.Raw)
	}
	if byName["old"].GetResourceHandle() != byName["new"].GetResourceHandle() {
		t.Fatalf("resource handle data %q and %q", byName["old"].GetResourceHandle(), byName["new"].GetResourceHandle())
	}
	if got, want := containerDevices(t, m, pod), []string{dratest.DeviceFor("old"), dratest.DeviceFor("new")}; !slices.Equal(got, want) {
		t.Fatalf("CDI devices %q, want %q", got, want)
	}
	if a, b := record(t, m, "old").Version, record(t, m, "new").Version; a != "resource.k8s.io/v1alpha2" || b != "resource.k8s.io/v1" {
		t.Fatalf("recorded versions %q and %q", a, b)
	}
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := claimNames(p.Unprepared()); !slices.EqualFunc(got, [][]string{{"new", "old"}}, slices.Equal) {
		t.Fatalf("unprepare calls %v, want one with both claims", got)
	}
}

// The prepared v1 claims survive a restart in the checkpoint: the claim of
// a pod deleted meanwhile is unprepared with its recorded handle, the
// other is adopted without a second prepare.
func TestV1ClaimRestartFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	p := e.plugin(first, gpuDriver)
	keep := e.v1Pod("keep", "keep", "gpu-0")
	gone := e.v1Pod("gone", "gone", "gpu-1/halves/half-0")
	for _, pod := range []*corev1.Pod{keep, gone} {
		wantAdmitted(t, admit(t, first, pod))
	}
	if n := len(p.Prepared()); n != 2 {
		t.Fatalf("%d prepare calls, want 2", n)
	}
	first.Stop()
	zero := int64(0)
	if err := e.admin.Pods(e.ns).Delete(callCtx(t), "gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(e.cpDir, CheckpointFile))
	if err != nil || !strings.Contains(string(data), `"version":"resource.k8s.io/v1"`) {
		t.Fatalf("checkpoint (%v) does not record the claims' version:\n%s", err, data)
	}

	second := e.start()
	if got := containerDevices(t, second, keep); !slices.Equal(got, []string{dratest.DeviceFor("keep")}) {
		t.Fatalf("devices of the adopted pod %q", got)
	}
	if rec := record(t, second, "keep"); rec.Version != "resource.k8s.io/v1" {
		t.Fatalf("restored record %+v", rec)
	}
	eventually(t, "claim of the deleted pod unprepared", func() (bool, string) {
		un := p.Unprepared()
		return len(un) == 1 && len(un[0]) == 1 && un[0][0].GetName() == "gone", ""
	})
	if h := structuredOf(t, p.Unprepared()[0][0]); !slices.Equal(instanceList(h), []string{"gpu-1/halves/half-0"}) || h.NodeName != e.node {
		t.Fatalf("unprepared handle %+v, want the recorded one", h)
	}
	wantAdmitted(t, admit(t, second, keep))
	if n := len(p.Prepared()); n != 2 {
		t.Fatalf("%d prepare calls after the restart, want still 2", n)
	}
}

// A v1 claim whose driver has no plugin here holds the pod, and its
// release waits for the driver, as with v1alpha2 claims.
func TestV1ClaimWaitsForDriver(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	pod := e.v1Pod("p", "gpu", "gpu-0")
	waitHold(t, m, pod, ReasonDriverNotRegistered, "DRA driver "+gpuDriver+" is not registered on node "+e.node)
	p := e.plugin(m, gpuDriver)
	wantAdmitted(t, admitOnce(m, pod))

	p.Unregister()
	eventually(t, "driver unregistered", func() (bool, string) { return m.drivers.get(gpuDriver) == nil, "" })
	err := release(t, m, pod)
	if err == nil || !strings.Contains(err.Error(), "driver "+gpuDriver+" is not registered") {
		t.Fatalf("Release without the driver = %v", err)
	}
	if c := e.unpreparedCondition("p"); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonWaitingForDriver ||
		!strings.Contains(c.Message, "to unprepare claim "+e.ns+"/gpu") {
		t.Fatalf("condition %+v, want False, %s, naming the claim", c, ReasonWaitingForDriver)
	}
	p.Register()
	eventually(t, "released once the driver is back", func() (bool, string) {
		err := release(t, m, pod)
		return err == nil, errString(err)
	})
	if n := len(p.Unprepared()); n != 1 {
		t.Fatalf("%d unprepare calls, want 1", n)
	}
}

// Network-attached devices of a v1 claim (another pool than the node's)
// reach their driver in the handle's data; the claim is usable where its
// node selector says.
func TestV1ClaimNetworkDevicesHandedToDriver(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, fabricDriver)
	e.v1Claim("fpga", "fabric")
	nic := resourcev1.DeviceRequestAllocationResult{Request: "fabric", Driver: fabricDriver, Pool: "rack-1", Device: "fpga-0"}
	a := &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{nic}},
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchExpressions: []kcorev1.NodeSelectorRequirement{
			{Key: "dra-test", Operator: kcorev1.NodeSelectorOpIn, Values: []string{"yes"}}}}}},
	}
	pod := e.bind(e.unboundPod("p", "fpga"), []string{fabricDriver}, allocV1(t, "fpga", a))
	wantAdmitted(t, admit(t, m, pod))
	calls := p.Prepared()
	if len(calls) != 1 || len(calls[0]) != 1 {
		t.Fatalf("prepare calls %v", claimNames(calls))
	}
	var data resourceconv.V1HandleData
	if err := json.Unmarshal([]byte(calls[0][0].GetResourceHandle()), &data); err != nil || len(data.Devices) != 1 || !reflect.DeepEqual(data.Devices[0], nic) {
		t.Fatalf("resource handle %q (%v), want the network device", calls[0][0].GetResourceHandle(), err)
	}
	if h := structuredOf(t, calls[0][0]); h.NodeName != "" || len(instanceList(h)) != 0 {
		t.Fatalf("structured handle %+v, want no node-local instances", h)
	}
}

// A driver's NOT_FOUND makes the Manager read a v1 claim again from the
// API server, through the version the checkpoint recorded.
func TestV1ClaimNotFoundRereadsClaim(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	cp := &countingPrepare{n: 1, msg: "no such instance", code: codes.NotFound}
	p.OnPrepare(cp.prepare)
	pod := e.v1Pod("p", "gpu", "gpu-0")
	wantHold(t, admit(t, m, pod), ReasonPrepareFailed, "no such instance", "NOT_FOUND")
	empty := client.NewLister[*resourcev1.ResourceClaim](cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		schema.GroupResource{Group: resourcev1.GroupName, Resource: "resourceclaims"})
	m.claimsV1 = &empty
	eventually(t, "admitted after re-reading the claim", func() (bool, string) {
		a := admitOnce(m, pod)
		return a.Verdict == pods.Admit, a.Message
	})
	if n := len(cp.times()); n != 2 {
		t.Fatalf("%d prepare calls, want 2", n)
	}
}
