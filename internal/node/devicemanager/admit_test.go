package devicemanager

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
)

func TestAdmitAllocatesAndConfiguresContainers(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true), dev("c", true)).start()
	m.waitServing(t, gpu, 3)

	pod := makePod("p").ask("main", gpu, 2).ask("side", "", 0).obj()
	mustAdmit(t, m, pod)
	ids := m.ids("p", "main", gpu)
	if len(ids) != 2 {
		t.Fatalf("main got %v, want 2 devices", ids)
	}
	opts, err := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := pods.ContainerOptions{
		Env:         []string{"STUB_DEVICES=" + strings.Join(ids, ",")},
		Mounts:      []runtime.Mount{{HostPath: "/opt/stub", ContainerPath: "/opt/stub", ReadOnly: true}},
		Devices:     []runtime.Device{{HostPath: "/dev/null", ContainerPath: "/dev/stub0", Permissions: "rw"}},
		Annotations: map[string]string{"stub.example.com/devices": strings.Join(ids, ",")},
		CDIDevices:  []string{"example.com/stub=" + ids[0]},
	}
	if !reflect.DeepEqual(opts, want) {
		t.Fatalf("ContainerOptions = %+v\nwant %+v", opts, want)
	}
	if side, _ := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[1]); !reflect.DeepEqual(side, pods.ContainerOptions{}) {
		t.Fatalf("container without devices got %+v", side)
	}

	// Admitting again (an agent retry) allocates nothing new.
	mustAdmit(t, m, pod)
	if again := m.ids("p", "main", gpu); !slices.Equal(again, ids) {
		t.Fatalf("re-admission changed devices %v → %v", ids, again)
	}
	wantVerdict(t, admit(t, m, makePod("q").ask("c", gpu, 2).obj()), pods.Reject, ReasonInsufficientDevices)
	mustAdmit(t, m, makePod("r").ask("c", gpu, 1).obj())
	if slices.Contains(ids, m.ids("r", "c", gpu)[0]) {
		t.Fatal("device handed out twice")
	}

	if err := m.Release(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(context.Background(), pod); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	mustAdmit(t, m, makePod("q").ask("c", gpu, 2).obj())
}

func TestAllocateFailureRejectsAndUndoes(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true)).start()
	bad := newStub(t, m.dir, "fpga.sock", "example.com/fpga", dev("f", true))
	bad.allocate = func(context.Context, *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
		return nil, errors.New("device on fire")
	}
	bad.start()
	m.waitServing(t, gpu, 2)
	m.waitServing(t, "example.com/fpga", 1)

	pod := makePod("p").ask("a", gpu, 2).ask("b", "example.com/fpga", 1).obj()
	wantVerdict(t, admit(t, m, pod), pods.Reject, ReasonAllocateFailed)
	if got := m.PodDevices("p"); len(got) != 0 {
		t.Fatalf("partial allocation kept: %v", got)
	}
	mustAdmit(t, m, makePod("q").ask("c", gpu, 2).obj())
}

func TestUnknownExtendedResourceIsNotOurs(t *testing.T) {
	m := startManager(t, socketDir(t))
	mustAdmit(t, m, makePod("p").ask("c", "example.com/dongle", 1).obj())
}

// A resource the pod's binding gave to DRA (a mapping in
// status.extendedResourceClaimStatus) is not the device manager's, even
// when a plugin serves the same name here: the container gets it from
// one of them only. Its other containers still get plugin devices.
func TestResourceGivenToDRAIsNotOurs(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", true)).start()
	m.waitServing(t, gpu, 1)
	pod := makePod("p").ask("by-dra", gpu, 1).ask("by-plugin", gpu, 1).obj()
	pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-x",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "by-dra", ResourceName: gpu, RequestName: "container-0-request-0"}}}
	mustAdmit(t, m, pod)
	if got := m.ids("p", "by-dra", gpu); len(got) != 0 {
		t.Fatalf("the container whose %s DRA serves got plugin devices %v", gpu, got)
	}
	if got := m.ids("p", "by-plugin", gpu); len(got) != 1 {
		t.Fatalf("the other container got %v, want the one plugin device", got)
	}
}

func TestPreferredAllocationHonoured(t *testing.T) {
	m := startManager(t, socketDir(t))
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true, 0), dev("b", true, 0), dev("c", true, 1), dev("d", true, 1))
	s.opts.GetPreferredAllocationAvailable = true
	var asked *pluginapi.ContainerPreferredAllocationRequest
	answer := []string{"a", "d"}
	s.preferred = func(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
		asked = r.ContainerRequests[0]
		return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: answer}}}, nil
	}
	s.start()
	m.waitServing(t, gpu, 4)

	mustAdmit(t, m, makePod("p").ask("c", gpu, 2).obj())
	if got := m.ids("p", "c", gpu); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("got %v, want the plugin's preference [a d]", got)
	}
	if asked.AllocationSize != 2 || !slices.Equal(asked.AvailableDeviceIDs, []string{"a", "b", "c", "d"}) {
		t.Fatalf("preferred request = %v", asked)
	}

	// An invalid answer (a taken device) is ignored: NUMA choice instead.
	s.mu.Lock()
	answer = []string{"a", "b"}
	s.mu.Unlock()
	mustAdmit(t, m, makePod("q").ask("c", gpu, 1).obj())
	if got := m.ids("q", "c", gpu); len(got) != 1 || got[0] == "a" || got[0] == "d" {
		t.Fatalf("q got %v despite an invalid preference", got)
	}
}

func TestNUMAPreference(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu,
		dev("n0-a", true, 0), dev("n1-a", true, 1), dev("n0-b", true, 0), dev("n1-b", true, 1), dev("n1-c", true, 1)).start()
	m.waitServing(t, gpu, 5)

	mustAdmit(t, m, makePod("two").ask("c", gpu, 2).obj())
	if got := m.ids("two", "c", gpu); !slices.Equal(got, []string{"n0-a", "n0-b"}) {
		t.Fatalf("2 devices: got %v, want NUMA node 0's (best fit)", got)
	}
	mustAdmit(t, m, makePod("three").ask("c", gpu, 3).obj())
	if got := m.ids("three", "c", gpu); !slices.Equal(got, []string{"n1-a", "n1-b", "n1-c"}) {
		t.Fatalf("3 devices: got %v, want NUMA node 1's", got)
	}
}

func TestChooseDevices(t *testing.T) {
	d := func(id string, numa ...int64) Device { return Device{ID: id, Healthy: true, NUMA: numa} }
	avail := []Device{d("a", 0), d("b", 1), d("c", 1), d("d", 0), d("e", 1), d("x")}
	tests := map[string]struct {
		must []string
		n    int
		want []string
	}{
		"best fit node":          {nil, 2, []string{"a", "d"}},
		"larger node":            {nil, 3, []string{"b", "c", "e"}},
		"spans nodes, fullest":   {nil, 4, []string{"b", "c", "e", "a"}},
		"must include first":     {[]string{"x"}, 2, []string{"x", "a"}},
		"too many":               {nil, 7, nil},
		"must larger than count": {[]string{"a", "b"}, 1, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := chooseDevices(avail, tc.must, tc.n); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPreStartContainerCalledWhenRequired(t *testing.T) {
	m := startManager(t, socketDir(t))
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true))
	s.opts.PreStartRequired = true
	s.start()
	m.waitServing(t, gpu, 1)
	pod := makePod("p").ask("c", gpu, 1).obj()
	mustAdmit(t, m, pod)
	for range 2 { // every container start
		if _, err := m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0]); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.preStarts) != 2 || !slices.Equal(s.preStarts[0], []string{"a"}) {
		t.Fatalf("PreStartContainer calls = %v, want [[a] [a]]", s.preStarts)
	}
}

func TestInitContainerDevicesAreReused(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true)).start()
	m.waitServing(t, gpu, 2)
	mustAdmit(t, m, makePod("p").askInit("init", gpu, 2).ask("app", gpu, 1).ask("app2", gpu, 1).obj())
	app, app2 := m.ids("p", "app", gpu), m.ids("p", "app2", gpu)
	if len(app) != 1 || len(app2) != 1 || app[0] == app2[0] {
		t.Fatalf("app containers got %v and %v, want distinct devices", app, app2)
	}
}

func TestDeviceIDsAreOpaque(t *testing.T) {
	m := startManager(t, socketDir(t))
	long := strings.Repeat("x", 200)
	weird := []string{"gpu\x00\x01", "\t\n ", "é/ü:🙂", long}
	var devs []*pluginapi.Device
	for _, id := range weird {
		devs = append(devs, dev(id, true))
	}
	s := newStub(t, m.dir, "gpu.sock", gpu, devs...).start()
	m.waitServing(t, gpu, 4)
	mustAdmit(t, m, makePod("p").ask("c", gpu, 4).obj())
	got := slices.Sorted(slices.Values(m.ids("p", "c", gpu)))
	if want := slices.Sorted(slices.Values(weird)); !slices.Equal(got, want) {
		t.Fatalf("allocated %q, want %q", got, want)
	}
	s.mu.Lock()
	sent := slices.Sorted(slices.Values(s.allocs[0]))
	s.mu.Unlock()
	if !slices.Equal(sent, got) {
		t.Fatalf("plugin received %q, want %q", sent, got)
	}
}

func TestSameIDsInTwoResourcesAreDistinct(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("0", true)).start()
	newStub(t, m.dir, "fpga.sock", "example.com/fpga", dev("0", true)).start()
	m.waitServing(t, gpu, 1)
	m.waitServing(t, "example.com/fpga", 1)
	mustAdmit(t, m, makePod("p").ask("a", gpu, 1).obj())
	mustAdmit(t, m, makePod("q").ask("a", "example.com/fpga", 1).obj())
	wantVerdict(t, admit(t, m, makePod("r").ask("a", gpu, 1).obj()), pods.Reject, ReasonInsufficientDevices)
}

func TestDuplicateIDsInOneListCountOnce(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", false), dev("a", true), dev("b", true)).start()
	m.waitServing(t, gpu, 2)
	if r := m.res(gpu); r.Allocatable != 2 {
		t.Fatalf("allocatable = %d, want 2 (last report of a wins)", r.Allocatable)
	}
}

func TestHungPluginDoesNotHangAdmit(t *testing.T) {
	m := startManager(t, socketDir(t), func(o *Options) { o.RPCTimeout = 200 * time.Millisecond })
	s := newStub(t, m.dir, "gpu.sock", gpu, dev("a", true))
	s.opts.GetPreferredAllocationAvailable = true
	s.opts.PreStartRequired = true
	s.preferred = hang[*pluginapi.PreferredAllocationRequest, *pluginapi.PreferredAllocationResponse]
	s.allocate = hang[*pluginapi.AllocateRequest, *pluginapi.AllocateResponse]
	s.start()
	m.waitServing(t, gpu, 1)

	start := time.Now()
	wantVerdict(t, admit(t, m, makePod("p").ask("c", gpu, 1).obj()), pods.Reject, ReasonAllocateFailed)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Admit took %v with a hung plugin", d)
	}

	// The caller's own deadline is honoured too, even below RPCTimeout.
	m2 := startManager(t, socketDir(t), func(o *Options) { o.RPCTimeout = time.Minute })
	s2 := newStub(t, m2.dir, "gpu.sock", gpu, dev("a", true))
	s2.allocate = hang[*pluginapi.AllocateRequest, *pluginapi.AllocateResponse]
	s2.start()
	m2.waitServing(t, gpu, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	wantVerdict(t, m2.Admit(ctx, makePod("p").ask("c", gpu, 1).obj()), pods.Reject, ReasonAllocateFailed)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Admit took %v past the caller's deadline", d)
	}
}

func TestConcurrentAdmitsNeverShareDevices(t *testing.T) {
	m := startManager(t, socketDir(t))
	newStub(t, m.dir, "gpu.sock", gpu, dev("a", true), dev("b", true), dev("c", true), dev("d", true), dev("e", true)).start()
	m.waitServing(t, gpu, 5)
	verdicts := make(chan pods.Verdict, 12)
	for i := range 12 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			verdicts <- m.Admit(ctx, makePod(string(rune('A'+i))).ask("c", gpu, 1).obj()).Verdict
		}()
	}
	admitted := 0
	for range 12 {
		if <-verdicts == pods.Admit {
			admitted++
		}
	}
	seen := map[string]bool{}
	for i := range 12 {
		for _, id := range m.ids(string(rune('A'+i)), "c", gpu) {
			if seen[id] {
				t.Fatalf("device %s handed out twice", id)
			}
			seen[id] = true
		}
	}
	if admitted != 5 || len(seen) != 5 {
		t.Fatalf("admitted %d pods holding %d devices, want 5 and 5", admitted, len(seen))
	}
}
