package dra

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/internal/node/pods"
)

// upstreamDriver speaks the kubelet's DRA API, as a driver built on
// k8s.io/dynamic-resource-allocation/kubeletplugin does.
const upstreamDriver = "upstream.example.com"

func TestValidateInfoPicksServices(t *testing.T) {
	const (
		v1      = drapbv1.DRAPluginService
		v1beta1 = drapbv1beta1.DRAPluginService
		h1      = drahealthv1.DRAResourceHealthService
		h1a1    = drahealthv1alpha1.DRAResourceHealthService
	)
	for _, tc := range []struct {
		name            string
		offered         []string
		service, health string
		err             error
	}{
		{"the upstream library's list", []string{v1, v1beta1, h1, h1a1}, v1, h1, nil},
		{"v1 preferred whatever the order", []string{h1a1, v1beta1, h1, v1}, v1, h1, nil},
		{"v1beta1 only, old health", []string{v1beta1, h1a1}, v1beta1, h1a1, nil},
		{"no health service", []string{v1}, v1, "", nil},
		{"allot's API wins over the kubelet's", []string{v1, drapb.Version, h1}, drapb.Version, "", nil},
		{"health alone is not a DRA API", []string{h1}, "", "", ErrUnsupportedVersion},
		{"nothing", nil, "", "", ErrUnsupportedVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := validateInfo(&registerapi.PluginInfo{Type: drapb.PluginType, Name: upstreamDriver, Endpoint: "/run/dra.sock", SupportedVersions: tc.offered})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				for _, s := range []string{v1, v1beta1, drapb.Version} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name the accepted %s", err, s)
					}
				}
				return
			}
			if reg.service != tc.service || reg.health != tc.health {
				t.Fatalf("service %q health %q, want %q %q", reg.service, reg.health, tc.service, tc.health)
			}
		})
	}
}

// kubeletPlugin starts a kubelet API test plugin and waits until it is
// registered.
func (e *env) kubeletPlugin(m *Manager, tweak ...func(*dratest.KubeletOptions)) *dratest.KubeletPlugin {
	e.t.Helper()
	o := dratest.KubeletOptions{Name: upstreamDriver, RegistryDir: e.registry}
	for _, f := range tweak {
		f(&o)
	}
	p := dratest.StartKubelet(e.t, o)
	if st := p.Status(e.t); !st.PluginRegistered {
		e.t.Fatalf("plugin %s not registered: %s", o.Name, st.Error)
	}
	eventually(e.t, o.Name+" registered", func() (bool, string) {
		d := m.drivers.get(o.Name)
		return d != nil && d.endpoint == p.DRAPath, ""
	})
	return p
}

// upstreamResult is a result of request for device of the upstream
// driver in pool.
func upstreamResult(request, pool, device string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: upstreamDriver, Pool: pool, Device: device}
}

// upstreamPod binds a new pod using a new v1 claim with the requests, one
// upstream device each (request r gets device dev-r), with one container
// per entry of uses: "" uses the whole claim, a name only that request.
func (e *env) upstreamPod(pod, claim string, requests []string, uses ...string) *corev1.Pod {
	e.t.Helper()
	e.v1Claim(claim, requests...)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: e.ns},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "c", ResourceClaimName: &claim}}}}
	for i, u := range uses {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "busybox",
			Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "c", Request: u}}}})
	}
	created, err := e.admin.Pods(e.ns).Create(callCtx(e.t), p)
	if err != nil {
		e.t.Fatalf("create pod %s: %v", pod, err)
	}
	a := &resourcev1.AllocationResult{NodeSelector: onNode(e.node)}
	for _, r := range requests {
		a.Devices.Results = append(a.Devices.Results, upstreamResult(r, e.node, "dev-"+r))
	}
	return e.bind(created, []string{upstreamDriver}, allocV1(e.t, claim, a))
}

// answerByRequest prepares every claim with one device per request name
// given, device dev-R with CDI device example.com/upstream=CLAIM-R.
func answerByRequest(requests ...string) dratest.KubeletPrepareFunc {
	return func(req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
		resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
		for _, c := range req.GetClaims() {
			r := &drapbv1.NodePrepareResourceResponse{}
			for _, name := range requests {
				r.Devices = append(r.Devices, &drapbv1.Device{RequestNames: []string{name}, PoolName: "pool", DeviceName: "dev-" + name,
					CdiDeviceIds: []string{"example.com/upstream=" + c.GetName() + "-" + name}})
			}
			resp.Claims[c.GetUid()] = r
		}
		return resp, nil
	}
}

func devicesOf(t *testing.T, m *Manager, pod *corev1.Pod, container int) []string {
	t.Helper()
	o, err := m.ContainerOptions(t.Context(), pod, &pod.Spec.Containers[container])
	if err != nil {
		t.Fatalf("ContainerOptions of %s: %v", pod.Spec.Containers[container].Name, err)
	}
	return o.CDIDevices
}

// A kubelet driver is sent the claim's reference, answers devices per
// request, and each container gets the CDI devices of the requests it
// names; the release sends the reference again.
func TestKubeletDriverPreparesByReference(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	p.OnPrepare(answerByRequest("a", "b"))
	pod := e.upstreamPod("p", "two", []string{"a", "b"}, "a", "", "b")
	wantAdmitted(t, admit(t, m, pod))

	calls := p.Prepared()
	if len(calls) != 1 || len(calls[0]) != 1 {
		t.Fatalf("prepare calls %v, want one with one claim", calls)
	}
	claim, err := e.admin.ResourceClaimsV1(e.ns).Get(callCtx(t), "two")
	if err != nil {
		t.Fatal(err)
	}
	if c := calls[0][0]; c.GetNamespace() != e.ns || c.GetName() != "two" || c.GetUid() != string(claim.UID) {
		t.Fatalf("claim sent %+v, want the reference %s/two %s", c, e.ns, claim.UID)
	}
	for i, want := range [][]string{
		{"example.com/upstream=two-a"},
		{"example.com/upstream=two-a", "example.com/upstream=two-b"},
		{"example.com/upstream=two-b"},
	} {
		if got := devicesOf(t, m, pod, i); !slices.Equal(got, want) {
			t.Errorf("container %d devices %q, want %q", i, got, want)
		}
	}
	rec := record(t, m, "two")
	if h := rec.handle(upstreamDriver); h == nil || !h.Kubelet || !h.Prepared || len(h.Devices) != 2 || h.Structured != nil {
		t.Fatalf("record %+v", rec)
	}

	if err := release(t, m, pod); err != nil {
		t.Fatalf("release: %v", err)
	}
	un := p.Unprepared()
	if len(un) != 1 || len(un[0]) != 1 || un[0][0].GetUid() != string(claim.UID) || un[0][0].GetName() != "two" {
		t.Fatalf("unprepare calls %v", un)
	}
	if n := m.store.count(); n != 0 {
		t.Fatalf("%d records after the release", n)
	}
}

// The upstream library fails a whole call when one claim cannot be read:
// the Manager then prepares the claims one by one, so only the bad one
// waits, and the next attempt sends only what is still unprepared.
func TestKubeletDriverBatchFailureRetriedOneByOne(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	broken := true
	p.OnPrepare(func(req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
		for _, c := range req.GetClaims() {
			if c.GetName() == "bad" && broken {
				return nil, fmt.Errorf("get resource claims: retrieve claim %s/bad: not found", c.GetNamespace())
			}
		}
		return answerByRequest("gpu")(req)
	})
	e.v1Claim("good", "gpu")
	e.v1Claim("bad", "gpu")
	a := &resourcev1.AllocationResult{NodeSelector: onNode(e.node), Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{upstreamResult("gpu", e.node, "dev-0")}}}
	b := &resourcev1.AllocationResult{NodeSelector: onNode(e.node), Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{upstreamResult("gpu", e.node, "dev-1")}}}
	pod := e.bind(e.unboundPod("p", "good", "bad"), []string{upstreamDriver}, allocV1(t, "good", a), allocV1(t, "bad", b))

	wantHold(t, admit(t, m, pod), ReasonPrepareFailed, "claim "+e.ns+"/bad", "not found")
	if rec := record(t, m, "good"); !rec.prepared() {
		t.Fatalf("the good claim is not prepared after the batch failed: %+v", rec)
	}
	if rec := record(t, m, "bad"); rec.prepared() {
		t.Fatalf("the bad claim is prepared: %+v", rec)
	}
	calls := len(p.Prepared())
	if calls != 3 {
		t.Fatalf("%d prepare calls, want 3 (the batch, then one per claim)", calls)
	}
	broken = false
	eventually(t, "pod admitted after the back-off", func() (bool, string) {
		a := m.Admit(t.Context(), pod)
		return a.Verdict == pods.Admit, a.Message
	})
	last := p.Prepared()[calls:]
	if len(last) != 1 || len(last[0]) != 1 || last[0][0].GetName() != "bad" {
		t.Fatalf("calls after the failure %v, want one with only the bad claim", last)
	}
}

// A claim stored as v1alpha2 is not offered to a kubelet driver, which
// reads v1 claims only: the pod waits, saying why.
func TestKubeletDriverRefusesV1alpha2Claim(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	pod := e.readyPod("p", "old", upstreamDriver)
	var a pods.Admission
	eventually(t, "the claim refused", func() (bool, string) {
		a = m.Admit(t.Context(), pod)
		return strings.Contains(a.Message, "speaks the kubelet's DRA API"), a.Message
	})
	wantHold(t, a, ReasonWaitingForClaim, "is stored as resource.k8s.io/v1alpha2", "create the claim as resource.k8s.io/v1")
	if n := len(p.Prepared()); n != 0 {
		t.Fatalf("%d prepare calls", n)
	}
}

// A v1beta1 driver is called through the converting wrapper.
func TestKubeletDriverV1beta1(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m, func(o *dratest.KubeletOptions) { o.Services = []string{drapbv1beta1.DRAPluginService} })
	if d := m.drivers.get(upstreamDriver); d.reg.service != drapbv1beta1.DRAPluginService {
		t.Fatalf("service %q", d.reg.service)
	}
	pod := e.upstreamPod("p", "c", []string{"gpu"}, "")
	wantAdmitted(t, admit(t, m, pod))
	if got := devicesOf(t, m, pod, 0); !slices.Equal(got, []string{dratest.KubeletDeviceFor("c")}) {
		t.Fatalf("devices %q", got)
	}
	if err := release(t, m, pod); err != nil || len(p.Unprepared()) != 1 {
		t.Fatalf("release: %v, unprepare calls %v", err, p.Unprepared())
	}
}

// nodeSlice creates a v1 ResourceSlice of this node for driver, owned by
// the Node when owned, as the upstream library publishes them. Its name
// is NODE-name (slices are cluster-wide; sliceNames strips the prefix).
func (e *env) nodeSlice(name, driver string, owned bool) {
	e.t.Helper()
	node, err := e.nc.Nodes().Get(callCtx(e.t), e.node)
	if err != nil {
		e.t.Fatal(err)
	}
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.node + "-" + name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &e.node,
			Pool:    resourcev1.ResourcePool{Name: e.node + "-" + name, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "dev-0"}}}}
	if owned {
		ctrl := true
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: e.node, UID: node.UID, Controller: &ctrl}}
	}
	if _, err := e.nc.ResourceSlices().Create(callCtx(e.t), s); err != nil {
		e.t.Fatalf("create slice %s: %v", name, err)
	}
}

func (e *env) sliceNames() []string {
	e.t.Helper()
	list, err := e.nc.ResourceSlices().List(callCtx(e.t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.node})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, strings.TrimPrefix(s.Name, e.node+"-"))
	}
	slices.Sort(out)
	return out
}

// Rolling update: a second instance registers beside the first and is
// called; when it goes the first is called again; when the last goes, the
// driver's Node-owned v1 slices are removed after the grace period, and
// other slices stay.
func TestKubeletDriverInstancesAndSliceWipe(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	first := e.kubeletPlugin(m, func(o *dratest.KubeletOptions) { o.RegSocket = "upstream.example.com-uid1-reg.sock" })
	second := e.kubeletPlugin(m, func(o *dratest.KubeletOptions) { o.RegSocket = "upstream.example.com-uid2-reg.sock" })
	e.nodeSlice("published", upstreamDriver, true)
	e.nodeSlice("by-hand", upstreamDriver, false)

	one := e.upstreamPod("one", "one", []string{"gpu"}, "")
	wantAdmitted(t, admit(t, m, one))
	if len(first.Prepared()) != 0 || len(second.Prepared()) != 1 {
		t.Fatalf("prepare calls: first %d, second %d; want the newest instance called", len(first.Prepared()), len(second.Prepared()))
	}
	second.Stop()
	eventually(t, "first instance current", func() (bool, string) {
		d := m.drivers.get(upstreamDriver)
		return d != nil && d.endpoint == first.DRAPath, ""
	})
	two := e.upstreamPod("two", "two", []string{"gpu"}, "")
	wantAdmitted(t, admit(t, m, two))
	if len(first.Prepared()) != 1 {
		t.Fatalf("prepare calls of the first instance: %d", len(first.Prepared()))
	}
	time.Sleep(2 * e.options().SliceGracePeriod)
	if got := e.sliceNames(); !slices.Equal(got, []string{"by-hand", "published"}) {
		t.Fatalf("slices while an instance is registered: %q", got)
	}
	first.Stop()
	eventually(t, "the driver's published slice removed", func() (bool, string) {
		got := e.sliceNames()
		return slices.Equal(got, []string{"by-hand"}), fmt.Sprintf("slices %q", got)
	})
}

// At start, a driver with Node-owned v1 slices here has the grace period
// to register; one that does not loses them, one that does keeps them.
func TestKubeletDriverSlicesAtStart(t *testing.T) {
	e := newEnv(t)
	e.nodeSlice("gone", "gone.example.com", true)
	e.nodeSlice("back", upstreamDriver, true)
	m := e.start()
	e.kubeletPlugin(m)
	eventually(t, "the slice of the driver that did not come back removed", func() (bool, string) {
		got := e.sliceNames()
		return slices.Equal(got, []string{"back"}), fmt.Sprintf("slices %q", got)
	})
}

// The health a kubelet driver streams reaches the container's
// allocatedResourcesStatus, and Unhealthy fails the pod; a report past its
// timeout reads Unknown.
func TestKubeletDriverHealth(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	p.OnPrepare(answerByRequest("a", "b"))
	pod := e.upstreamPod("p", "h", []string{"a", "b"}, "b")
	wantAdmitted(t, admit(t, m, pod))
	status := func() []corev1.ResourceHealth {
		st := m.AllocatedResourcesStatus(pod, "c0")
		if len(st) != 1 || st[0].Name != "claim:c/b" {
			t.Fatalf("status %+v, want one entry claim:c/b", st)
		}
		return st[0].Resources
	}
	if r := status(); len(r) != 1 || r[0].ResourceID != upstreamDriver+"/pool/dev-b" || r[0].Health != corev1.ResourceHealthStatusUnknown {
		t.Fatalf("before any report: %+v", r)
	}
	if f := m.PodFailure(pod); f != nil {
		t.Fatalf("failure before any report: %+v", f)
	}
	dev := func(name string, h drahealthv1.HealthStatus, timeout int64) *drahealthv1.DeviceHealth {
		return &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "pool", DeviceName: name}, Health: h,
			LastUpdatedTime: time.Now().Unix(), HealthCheckTimeoutSeconds: timeout, Message: "ECC errors"}
	}
	p.SetHealth(dev("dev-a", drahealthv1.HealthStatus_HEALTHY, 0), dev("dev-b", drahealthv1.HealthStatus_UNHEALTHY, 0))
	eventually(t, "unhealthy reported", func() (bool, string) {
		r := status()
		return r[0].Health == corev1.ResourceHealthStatusUnhealthy, fmt.Sprintf("%+v", r)
	})
	f := m.PodFailure(pod)
	if f == nil || f.Reason != pods.ReasonDeviceUnhealthy || !strings.Contains(f.Message, "dev-b") || !strings.Contains(f.Message, "ECC errors") {
		t.Fatalf("failure %+v", f)
	}
	p.SetHealth(dev("dev-b", drahealthv1.HealthStatus_HEALTHY, 1))
	eventually(t, "healthy reported", func() (bool, string) {
		r := status()
		return r[0].Health == corev1.ResourceHealthStatusHealthy, fmt.Sprintf("%+v", r)
	})
	eventually(t, "the report times out", func() (bool, string) {
		r := status()
		return r[0].Health == corev1.ResourceHealthStatusUnknown, fmt.Sprintf("%+v", r)
	})
}

// After a restart, the checkpoint gives containers their devices without
// asking the driver, and a claim of a pod deleted meanwhile is unprepared
// by reference.
func TestKubeletDriverRestartFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	p := e.kubeletPlugin(first)
	keep := e.upstreamPod("keep", "keep", []string{"gpu"}, "")
	gone := e.upstreamPod("gone", "gone", []string{"gpu"}, "")
	for _, pod := range []*corev1.Pod{keep, gone} {
		wantAdmitted(t, admit(t, first, pod))
	}
	first.Stop()
	zero := int64(0)
	if err := e.admin.Pods(e.ns).Delete(callCtx(t), "gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(e.cpDir, CheckpointFile))
	if err != nil || !strings.Contains(string(data), `"kubelet":true`) || !strings.Contains(string(data), `"device":"dev-keep"`) {
		t.Fatalf("checkpoint (%v) does not record the kubelet driver's answer:\n%s", err, data)
	}
	p.Unregister() // registers again with the new manager
	second := e.start()
	p.Register()
	if got := devicesOf(t, second, keep, 0); !slices.Equal(got, []string{dratest.KubeletDeviceFor("keep")}) {
		t.Fatalf("devices of the adopted pod %q", got)
	}
	eventually(t, "claim of the deleted pod unprepared", func() (bool, string) {
		un := p.Unprepared()
		return len(un) == 1 && len(un[0]) == 1 && un[0][0].GetName() == "gone", fmt.Sprintf("%v", un)
	})
	wantAdmitted(t, admit(t, second, keep))
	if n := len(p.Prepared()); n != 2 {
		t.Fatalf("%d prepare calls after the restart, want still 2", n)
	}
}

// A driver that changes API: registered through the kubelet's API while
// the node has its NodeResourceSlice, that slice is removed (its v1
// slices would be refused beside it); registered through allot's API
// again, its Node-owned v1 slices are removed, and a v1 slice the node
// agent does not own is reported.
func TestKubeletDriverSwitchesAPI(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	seedSlices := func() int {
		l, err := e.admin.NodeResourceSlices().List(callCtx(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.node})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	seed := e.plugin(m, upstreamDriver, func(o *dratest.Options) { o.Model = model("gpu-0") })
	eventually(t, "the seed slice", func() (bool, string) { return seedSlices() == 1, "" })
	seed.Stop()
	p := e.kubeletPlugin(m)
	eventually(t, "the seed slice removed", func() (bool, string) { return seedSlices() == 0, "" })
	e.nodeSlice("published", upstreamDriver, true)
	e.nodeSlice("by-hand", upstreamDriver, false)
	p.Stop()
	e.plugin(m, upstreamDriver, func(o *dratest.Options) { o.Model = model("gpu-0") })
	eventually(t, "the Node-owned v1 slice removed", func() (bool, string) {
		got := e.sliceNames()
		return slices.Equal(got, []string{"by-hand"}), fmt.Sprintf("slices %q", got)
	})
	eventually(t, "the events", func() (bool, string) {
		n := 0
		for _, ev := range e.events.all() {
			if strings.Contains(ev, ReasonSwitchedAPI) || (strings.Contains(ev, ReasonPublishedTwice) && strings.Contains(ev, "by-hand")) {
				n++
			}
		}
		return n == 3, fmt.Sprintf("events %q", e.events.all())
	})
}

// A kubelet driver killed with SIGKILL leaves its registration socket:
// once its DRA socket has not answered for a few redial intervals it is
// unregistered, and its slices go after the grace period.
func TestKubeletDriverGoneWhenSocketDoesNotAnswer(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	e.nodeSlice("published", upstreamDriver, true)
	p.StopDRA()
	eventually(t, "driver unregistered", func() (bool, string) { return m.drivers.get(upstreamDriver) == nil, "" })
	eventually(t, "its slice removed", func() (bool, string) {
		got := e.sliceNames()
		return len(got) == 0, fmt.Sprintf("slices %q", got)
	})
}

// A batch the driver does not answer (unavailable, deadline) is not
// retried claim by claim: that would only wait as long again per claim.
func TestKubeletDriverUnansweredBatchNotSplit(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.kubeletPlugin(m)
	p.OnPrepare(func(*drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
		return nil, status.Error(codes.Unavailable, "driver restarting")
	})
	e.v1Claim("one", "gpu")
	e.v1Claim("two", "gpu")
	alloc := func(dev string) *resourcev1.AllocationResult {
		return &resourcev1.AllocationResult{NodeSelector: onNode(e.node), Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{upstreamResult("gpu", e.node, dev)}}}
	}
	pod := e.bind(e.unboundPod("p", "one", "two"), []string{upstreamDriver}, allocV1(t, "one", alloc("dev-0")), allocV1(t, "two", alloc("dev-1")))
	wantHold(t, admit(t, m, pod), ReasonPrepareFailed, "driver restarting")
	if n := len(p.Prepared()); n != 1 {
		t.Fatalf("%d prepare calls, want 1 (the batch only)", n)
	}
}
