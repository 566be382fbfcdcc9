package podresources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/devicemanager"
)

type fakeDevices struct {
	pods      map[string]map[string]map[string][]string
	resources []devicemanager.Resource
}

func (f fakeDevices) PodDevices(uid string) map[string]map[string][]string { return f.pods[uid] }
func (f fakeDevices) Resources() []devicemanager.Resource                  { return f.resources }

func pod(ns, name, uid string, phase corev1.PodPhase, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	p.Status.Phase = phase
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

// serve starts the server on a socket in a temp dir and returns a client.
func serve(t *testing.T, s *Server) podresourcesapi.PodResourcesListerClient {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pod-resources", "kubelet.sock")
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	serveAt(t, s, path)
	return podresourcesapi.NewPodResourcesListerClient(conn)
}

// serveAt runs s.Serve at path until the test ends.
func serveAt(t *testing.T, s *Server, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, path) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket did not appear")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("socket left behind: %v", err)
		}
	})
}

func TestPodResourcesOverSocket(t *testing.T) {
	zero, one := []int64{0}, []int64{1}
	dev := fakeDevices{
		pods: map[string]map[string]map[string][]string{
			"uid-a": {"main": {"example.com/gpu": {"gpu-2", "gpu-0"}}},
		},
		resources: []devicemanager.Resource{{
			Name: "example.com/gpu", State: devicemanager.StateServing,
			Devices: []devicemanager.Device{
				{ID: "gpu-0", Healthy: true, NUMA: zero},
				{ID: "gpu-1", Healthy: false, NUMA: zero},
				{ID: "gpu-2", Healthy: true, NUMA: one},
				{ID: "gpu-3", Healthy: true},
			},
		}},
	}
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{
			pod("ns", "b", "uid-b", corev1.PodRunning, "only"),
			pod("ns", "a", "uid-a", corev1.PodRunning, "main", "side"),
			pod("ns", "done", "uid-c", corev1.PodSucceeded, "x"),
		}
	}
	cli := serve(t, New(dev, pods))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	list, err := cli.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"podResources":[` +
		`{"name":"a","namespace":"ns","containers":[` +
		`{"name":"main","devices":[` +
		`{"resourceName":"example.com/gpu","deviceIds":["gpu-0"],"topology":{"nodes":[{}]}},` +
		`{"resourceName":"example.com/gpu","deviceIds":["gpu-2"],"topology":{"nodes":[{"ID":"1"}]}}]},` +
		`{"name":"side"}]},` +
		`{"name":"b","namespace":"ns","containers":[{"name":"only"}]}]}`
	if got := mustJSON(t, list); got != want {
		t.Fatalf("List:\n got %s\nwant %s", got, want)
	}

	get, err := cli.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "a", PodNamespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if got := get.GetPodResources(); got.GetName() != "a" || len(got.GetContainers()) != 2 ||
		len(got.GetContainers()[0].GetDevices()) != 2 {
		t.Fatalf("Get a: %s", mustJSON(t, get))
	}
	for _, name := range []string{"missing", "done"} {
		_, err = cli.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: name, PodNamespace: "ns"})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("Get %s: %v, want NotFound", name, err)
		}
	}

	alloc, err := cli.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want = `{"devices":[` +
		`{"resourceName":"example.com/gpu","deviceIds":["gpu-0"],"topology":{"nodes":[{}]}},` +
		`{"resourceName":"example.com/gpu","deviceIds":["gpu-2"],"topology":{"nodes":[{"ID":"1"}]}},` +
		`{"resourceName":"example.com/gpu","deviceIds":["gpu-3"]}]}`
	if got := mustJSON(t, alloc); got != want {
		t.Fatalf("GetAllocatableResources:\n got %s\nwant %s", got, want)
	}
}

func TestNoDeviceManager(t *testing.T) {
	cli := serve(t, New(nil, func() []*corev1.Pod { return []*corev1.Pod{pod("ns", "a", "u", corev1.PodPending, "c")} }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, list), `{"podResources":[{"name":"a","namespace":"ns","containers":[{"name":"c"}]}]}`; got != want {
		t.Fatalf("List: got %s, want %s", got, want)
	}
	alloc, err := cli.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil || len(alloc.GetDevices()) != 0 {
		t.Fatalf("GetAllocatableResources: %v, %v", alloc, err)
	}
}

func TestServeReplacesStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubelet.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(nil, nil).Serve(ctx, path) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stale file not replaced by a socket")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := protojson.MarshalOptions{}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// protojson output is deliberately unstable in whitespace.
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatal(err)
	}
	return c.String()
}

func TestServeLeavesLiveSocketAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	serveAt(t, New(nil, nil), path)
	err := New(nil, nil).Serve(context.Background(), path)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Serve: %v, want ErrInUse", err)
	}
}

// fakeDynamic answers from a map of "POD-UID/CONTAINER" to its claims.
type fakeDynamic map[string][]*podresourcesapi.DynamicResource

func (f fakeDynamic) ContainerDynamicResources(p *corev1.Pod, container string) []*podresourcesapi.DynamicResource {
	return f[string(p.UID)+"/"+container]
}

func TestDynamicResources(t *testing.T) {
	share := "s-1"
	dyn := fakeDynamic{
		"uid-a/main": {{ClaimName: "gpus", ClaimNamespace: "ns", ClaimResources: []*podresourcesapi.ClaimResource{
			{DriverName: "gpu.example.com", PoolName: "node-1", DeviceName: "gpu-1--halves--half-0",
				CdiDevices: []*podresourcesapi.CDIDevice{{Name: "example.com/gpu=half-0"}}},
			{DriverName: "upstream.example.com", PoolName: "pool", DeviceName: "dev-b", ShareId: &share},
		}}},
		"uid-b/only": {{ClaimName: "nic", ClaimNamespace: "ns"}},
	}
	dev := fakeDevices{
		pods: map[string]map[string]map[string][]string{"uid-a": {"main": {"example.com/gpu": {"gpu-0"}}}},
		resources: []devicemanager.Resource{{Name: "example.com/gpu", State: devicemanager.StateServing,
			Devices: []devicemanager.Device{{ID: "gpu-0", Healthy: true}}}},
	}
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{
			pod("ns", "a", "uid-a", corev1.PodRunning, "main", "side"),
			pod("ns", "b", "uid-b", corev1.PodPending, "only"),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name    string
		devices Devices
		want    string
	}{
		{"with device plugins", dev, `{"podResources":[` +
			`{"name":"a","namespace":"ns","containers":[` +
			`{"name":"main","devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0"]}],"dynamicResources":[` +
			`{"claimName":"gpus","claimNamespace":"ns","claimResources":[` +
			`{"cdiDevices":[{"name":"example.com/gpu=half-0"}],"driverName":"gpu.example.com","poolName":"node-1","deviceName":"gpu-1--halves--half-0"},` +
			`{"driverName":"upstream.example.com","poolName":"pool","deviceName":"dev-b","shareId":"s-1"}]}]},` +
			`{"name":"side"}]},` +
			`{"name":"b","namespace":"ns","containers":[{"name":"only","dynamicResources":[{"claimName":"nic","claimNamespace":"ns"}]}]}]}`},
		{"DRA only", nil, `{"podResources":[` +
			`{"name":"a","namespace":"ns","containers":[` +
			`{"name":"main","dynamicResources":[` +
			`{"claimName":"gpus","claimNamespace":"ns","claimResources":[` +
			`{"cdiDevices":[{"name":"example.com/gpu=half-0"}],"driverName":"gpu.example.com","poolName":"node-1","deviceName":"gpu-1--halves--half-0"},` +
			`{"driverName":"upstream.example.com","poolName":"pool","deviceName":"dev-b","shareId":"s-1"}]}]},` +
			`{"name":"side"}]},` +
			`{"name":"b","namespace":"ns","containers":[{"name":"only","dynamicResources":[{"claimName":"nic","claimNamespace":"ns"}]}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := serve(t, New(tc.devices, pods, WithDynamicResources(dyn)))
			list, err := cli.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := mustJSON(t, list); got != tc.want {
				t.Fatalf("List:\n got %s\nwant %s", got, tc.want)
			}
			get, err := cli.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "a", PodNamespace: "ns"})
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(get.GetPodResources(), list.GetPodResources()[0]) {
				t.Fatalf("Get a: %s, want List's %s", mustJSON(t, get.GetPodResources()), mustJSON(t, list.GetPodResources()[0]))
			}
			// GetAllocatableResources reports device-plugin devices only.
			alloc, err := cli.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			want := `{}`
			if tc.devices != nil {
				want = `{"devices":[{"resourceName":"example.com/gpu","deviceIds":["gpu-0"]}]}`
			}
			if got := mustJSON(t, alloc); got != want {
				t.Fatalf("GetAllocatableResources: got %s, want %s", got, want)
			}
		})
	}
}

// A nil source reports no dynamic resources.
func TestNilDynamicResources(t *testing.T) {
	s := New(nil, func() []*corev1.Pod { return []*corev1.Pod{pod("ns", "a", "u", corev1.PodRunning, "c")} }, WithDynamicResources(nil))
	list, err := s.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, list), `{"podResources":[{"name":"a","namespace":"ns","containers":[{"name":"c"}]}]}`; got != want {
		t.Fatalf("List: got %s, want %s", got, want)
	}
}
