package dra

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/pods"
)

// gpuModel is gpu-0 and gpu-1 split in halves; gpu1Health is gpu-1's
// health field ("" for none).
func gpuModel(gpu1Health string) []byte {
	h := ""
	if gpu1Health != "" {
		h = fmt.Sprintf(`,"health":%q`, gpu1Health)
	}
	return []byte(`{"partitionable":{"resourceInstances":[{"name":"gpu-0"},` +
		`{"name":"gpu-1"` + h + `,"partitions":[{"name":"halves","resourceInstances":[{"name":"half-0"},{"name":"half-1"}]}]}]}}`)
}

// boundPod creates a pod whose container uses the claims (entry name =
// claim name) and binds it to this node the way the scheduler does:
// node, structured allocations of the driver's instances (claim name →
// instance IDs) and reservations in one pods/binding write.
func (e *env) boundPod(name, driver string, instances map[string][]string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: e.node}}
	rv := ""
	for _, claim := range slices.Sorted(maps.Keys(instances)) {
		rv = e.claim(claim).ResourceVersion
		sd := &resourcev1alpha2.StructuredResourceHandle{NodeName: e.node, Partitionable: &resourcev1alpha2.PartitionableAllocationResult{}}
		for _, id := range instances[claim] {
			sd.Partitionable.Instances = append(sd.Partitionable.Instances, resourcev1alpha2.AllocatedResourceInstance{ID: id})
		}
		alloc, err := json.Marshal(resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: driver, StructuredData: sd}}})
		if err != nil {
			e.t.Fatal(err)
		}
		b.ResourceClaims = append(b.ResourceClaims, corev1.BindingResourceClaim{Name: claim, DriverName: driver, Allocation: &k8sruntime.RawExtension{Raw: alloc}})
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: claim, ResourceClaimName: &claim})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: claim})
	}
	b.AllocationFences = []corev1.AllocationFence{{NodeName: e.node, DriverName: driver, Revision: rv}}
	if _, err := e.admin.Pods(e.ns).Create(callCtx(e.t), p); err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	if _, err := e.admin.Bind(callCtx(e.t), e.ns, name, b); err != nil {
		e.t.Fatalf("bind pod %s: %v", name, err)
	}
	out, err := e.admin.Pods(e.ns).Get(callCtx(e.t), name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	return out
}

// healthString renders allocatedResourcesStatus as "NAME ID HEALTH; ...".
func healthString(st []corev1.ResourceStatus) string {
	var parts []string
	for _, s := range st {
		for _, r := range s.Resources {
			parts = append(parts, s.Name+" "+r.ResourceID+" "+string(r.Health))
		}
	}
	return strings.Join(parts, "; ")
}

func TestInstanceHealthReportedAndFailsPods(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver, func(o *dratest.Options) { o.Model = gpuModel("") })
	e.waitSlice(gpuDriver, "slice published", hasInstances("gpu-0,gpu-1"))
	pod := e.boundPod("p", gpuDriver, map[string][]string{"whole": {"gpu-0"}, "half": {"gpu-1/halves/half-0"}})
	wantAdmitted(t, admit(t, m, pod))

	status := func() string { return healthString(m.AllocatedResourcesStatus(pod, "main")) }
	healthy := "claim:half gpu.example.com/gpu-1/halves/half-0 Healthy; claim:whole gpu.example.com/gpu-0 Healthy"
	if got := status(); got != healthy {
		t.Fatalf("status %q, want %q", got, healthy)
	}
	if f := m.PodFailure(pod); f != nil {
		t.Fatalf("PodFailure with every instance healthy: %+v", f)
	}
	if got := m.AllocatedResourcesStatus(pod, "other"); got != nil {
		t.Fatalf("status of a container not in the pod: %+v", got)
	}

	// gpu-1 unhealthy: its half is too, through its parent.
	wakes := e.wakes.count(pod.UID)
	p.SetModel(gpuModel("Unhealthy"))
	unhealthy := "claim:half gpu.example.com/gpu-1/halves/half-0 Unhealthy; claim:whole gpu.example.com/gpu-0 Healthy"
	eventually(t, "half-0 unhealthy", func() (bool, string) { return status() == unhealthy, status() })
	eventually(t, "pod woken", func() (bool, string) { return e.wakes.count(pod.UID) > wakes, "" })
	f := m.PodFailure(pod)
	if f == nil || f.Reason != pods.ReasonDeviceUnhealthy || !strings.Contains(f.Message, "gpu-1/halves/half-0") ||
		!strings.Contains(f.Message, e.ns+"/half") || !strings.Contains(f.Message, gpuDriver) {
		t.Fatalf("PodFailure = %+v, want %s naming the instance, claim and driver", f, pods.ReasonDeviceUnhealthy)
	}
	e.waitSlice(gpuDriver, "slice says gpu-1 Unhealthy", func(s *resourcev1alpha2.NodeResourceSlice) bool {
		return s.Spec.Partitionable.ResourceInstances[1].Health == resourcev1alpha2.InstanceUnhealthy
	})

	// Recovered.
	p.SetModel(gpuModel("Healthy"))
	eventually(t, "half-0 healthy again", func() (bool, string) { return status() == healthy, status() })
	if f := m.PodFailure(pod); f != nil {
		t.Fatalf("PodFailure after recovery: %+v", f)
	}

	// The driver goes away: unknown, and no failure (seed 001: a plugin
	// that dies does not touch running pods).
	p.SetModel(gpuModel("Unhealthy"))
	eventually(t, "half-0 unhealthy", func() (bool, string) { return status() == unhealthy, status() })
	p.Stop()
	unknown := "claim:half gpu.example.com/gpu-1/halves/half-0 Unknown; claim:whole gpu.example.com/gpu-0 Unknown"
	eventually(t, "health unknown without the driver", func() (bool, string) { return status() == unknown, status() })
	if f := m.PodFailure(pod); f != nil {
		t.Fatalf("PodFailure without the driver: %+v", f)
	}
}

func TestInstanceHealthIndex(t *testing.T) {
	h := newInstanceHealth()
	if got := h.of(gpuDriver, "gpu-0"); got != corev1.ResourceHealthStatusUnknown {
		t.Fatalf("before any model: %s, want Unknown", got)
	}
	var model resourcev1alpha2.NodeResourceModel
	set := func(health string) bool {
		t.Helper()
		model = resourcev1alpha2.NodeResourceModel{}
		if err := json.Unmarshal(gpuModel(health), &model); err != nil {
			t.Fatal(err)
		}
		return h.set(gpuDriver, &model)
	}
	if !set("") {
		t.Fatal("first model: no change reported")
	}
	if set("Healthy") {
		t.Fatal("explicit Healthy reported as a change")
	}
	for id, want := range map[string]corev1.ResourceHealthStatus{
		"gpu-0": corev1.ResourceHealthStatusHealthy, "gpu-1/halves/half-1": corev1.ResourceHealthStatusHealthy,
		"gpu-2": corev1.ResourceHealthStatusUnknown, "half-1": corev1.ResourceHealthStatusUnknown,
	} {
		if got := h.of(gpuDriver, id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if !set("Unhealthy") {
		t.Fatal("gpu-1 Unhealthy: no change reported")
	}
	if got := h.of(gpuDriver, "gpu-1/halves/half-1"); got != corev1.ResourceHealthStatusUnhealthy {
		t.Fatalf("half of an unhealthy GPU: %s, want Unhealthy", got)
	}
	if !h.forget(gpuDriver) || h.forget(gpuDriver) {
		t.Fatal("forget: want true once, then false")
	}
}
