package dra

import (
	"fmt"
	"strings"
	"testing"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/dra/dratest"
)

// dynString renders ContainerDynamicResources' answer, one claim per
// line: "NS/NAME: DRIVER POOL DEVICE [CDI...] share=ID; ...".
func dynString(rs []*podresourcesv1.DynamicResource) string {
	var lines []string
	for _, r := range rs {
		var devs []string
		for _, c := range r.GetClaimResources() {
			var cdi []string
			for _, d := range c.GetCdiDevices() {
				cdi = append(cdi, d.GetName())
			}
			s := fmt.Sprintf("%s %s %s %v", c.GetDriverName(), c.GetPoolName(), c.GetDeviceName(), cdi)
			if c.ShareId != nil {
				s += " share=" + c.GetShareId()
			}
			devs = append(devs, s)
		}
		lines = append(lines, r.GetClaimNamespace()+"/"+r.GetClaimName()+": "+strings.Join(devs, "; "))
	}
	return strings.Join(lines, "\n")
}

// An allot driver's claim: one device per allocated seed instance, in the
// node's pool under its v1 device name, with the handle's CDI devices,
// from memory and, after a restart, from the checkpoint; nothing once
// released.
func TestContainerDynamicResourcesAllotDriver(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	e.plugin(first, gpuDriver)
	pod := e.v1Pod("p", "gpu", "gpu-0", "gpu-1/halves/half-0")
	if got := first.ContainerDynamicResources(pod, "main"); len(got) != 0 {
		t.Fatalf("before admission: %s", dynString(got))
	}
	wantAdmitted(t, admit(t, first, pod))

	cdi := dratest.DeviceFor("gpu")
	want := fmt.Sprintf("%s/gpu: %s %s gpu-0 [%s]; %s %s gpu-1--halves--half-0 [%s]", e.ns, gpuDriver, e.node, cdi, gpuDriver, e.node, cdi)
	if got := dynString(first.ContainerDynamicResources(pod, "main")); got != want {
		t.Fatalf("dynamic resources\n got %s\nwant %s", got, want)
	}
	if got := first.ContainerDynamicResources(pod, "nope"); got != nil {
		t.Fatalf("unknown container: %s", dynString(got))
	}

	first.Stop()
	second := e.start()
	if got := dynString(second.ContainerDynamicResources(pod, "main")); got != want {
		t.Fatalf("after a restart\n got %s\nwant %s", got, want)
	}
	eventually(t, gpuDriver+" registered again", func() (bool, string) { return second.drivers.get(gpuDriver) != nil, "" })
	if err := release(t, second, pod); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := second.ContainerDynamicResources(pod, "main"); len(got) != 0 {
		t.Fatalf("after the release: %s", dynString(got))
	}
}

// An allot driver's claims without seed instances: a v1 claim's
// network-attached devices are named by their pool and device; a
// control-plane controller's allocation (opaque data) by its CDI devices
// only.
func TestContainerDynamicResourcesAllotDriverWithoutInstances(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	e.plugin(m, fabricDriver)
	e.v1Claim("fpga", "fabric")
	a := &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "fabric", Driver: fabricDriver, Pool: "rack-1", Device: "fpga-0"}}},
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchExpressions: []kcorev1.NodeSelectorRequirement{
			{Key: "dra-test", Operator: kcorev1.NodeSelectorOpIn, Values: []string{"yes"}}}}}},
	}
	pod := e.bind(e.unboundPod("p", "fpga"), []string{fabricDriver}, allocV1(t, "fpga", a))
	wantAdmitted(t, admit(t, m, pod))
	want := fmt.Sprintf("%s/fpga: %s rack-1 fpga-0 [%s]", e.ns, fabricDriver, dratest.DeviceFor("fpga"))
	if got := dynString(m.ContainerDynamicResources(pod, "main")); got != want {
		t.Fatalf("network device\n got %s\nwant %s", got, want)
	}

	old := e.readyPod("old", "old", fabricDriver)
	wantAdmitted(t, admit(t, m, old))
	want = fmt.Sprintf("%s/old: %s   [%s]", e.ns, fabricDriver, dratest.DeviceFor("old"))
	if got := dynString(m.ContainerDynamicResources(old, "main")); got != want {
		t.Fatalf("opaque allocation\n got %q\nwant %q", got, want)
	}
}

// A kubelet driver's claim: each container gets the devices of the
// requests it names (all of them when it names the whole claim), with
// their pool, device, CDI devices and share ID.
func TestContainerDynamicResourcesKubeletDriver(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	p.OnPrepare(func(req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
		resp, err := answerByRequest("a", "b")(req)
		for _, r := range resp.GetClaims() {
			for _, d := range r.GetDevices() {
				if d.GetDeviceName() == "dev-b" {
					share := "share-1"
					d.ShareId = &share
				}
			}
		}
		return resp, err
	})
	pod := e.upstreamPod("p", "two", []string{"a", "b"}, "b", "", "a")
	wantAdmitted(t, admit(t, m, pod))

	devA := upstreamDriver + " pool dev-a [example.com/upstream=two-a]"
	devB := upstreamDriver + " pool dev-b [example.com/upstream=two-b] share=share-1"
	for container, want := range map[string]string{
		"c0": e.ns + "/two: " + devB,
		"c1": e.ns + "/two: " + devA + "; " + devB,
		"c2": e.ns + "/two: " + devA,
	} {
		if got := dynString(m.ContainerDynamicResources(pod, container)); got != want {
			t.Errorf("container %s\n got %s\nwant %s", container, got, want)
		}
	}
}

// A container naming two requests of one claim gets one entry for the
// claim, with each device once.
func TestContainerDynamicResourcesClaimNamedTwice(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	p.OnPrepare(answerByRequest("a", "b", "c"))
	pod := e.upstreamPod("p", "three", []string{"a", "b", "c"}, "a")
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "c", Request: "b"}, {Name: "c", Request: "a"}, {Name: "c"}}
	wantAdmitted(t, admit(t, m, pod))
	want := e.ns + "/three: " + upstreamDriver + " pool dev-a [example.com/upstream=three-a]; " +
		upstreamDriver + " pool dev-b [example.com/upstream=three-b]; " +
		upstreamDriver + " pool dev-c [example.com/upstream=three-c]"
	if got := dynString(m.ContainerDynamicResources(pod, "c0")); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "c", Request: "c"}, {Name: "c", Request: "a"}}
	want = e.ns + "/three: " + upstreamDriver + " pool dev-a [example.com/upstream=three-a]; " +
		upstreamDriver + " pool dev-c [example.com/upstream=three-c]"
	if got := dynString(m.ContainerDynamicResources(pod, "c0")); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}
