// Package podresources serves the kubelet's PodResources API
// (k8s.io/kubelet/pkg/apis/podresources/v1) on a unix socket, so that
// monitoring agents written for the kubelet (DCGM exporter, SR-IOV and
// NUMA tooling) find out which devices each container of this node holds.
//
// It reports each container's device-plugin devices and, with a
// DynamicResources source (the DRA manager), its DRA devices; CPU and
// memory pinning are not managed by allot, so those fields stay empty.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/devicemanager"
)

// Devices is what the server reads from the device manager
// (*devicemanager.Manager implements it).
type Devices interface {
	// PodDevices returns container → resource → device IDs.
	PodDevices(podUID string) map[string]map[string][]string
	// Resources returns a snapshot of every resource.
	Resources() []devicemanager.Resource
}

// Pods lists the pods bound to this node.
type Pods func() []*corev1.Pod

// DynamicResources is what the server reads from the DRA manager
// (*dra.Manager implements it): the DRA devices of a pod's container,
// one entry per claim it uses, for ContainerResources.dynamic_resources.
type DynamicResources interface {
	ContainerDynamicResources(pod *corev1.Pod, container string) []*podresourcesapi.DynamicResource
}

// Option configures a Server.
type Option func(*Server)

// WithDynamicResources makes List and Get report each container's DRA
// devices from src (nil: none reported).
func WithDynamicResources(src DynamicResources) Option {
	return func(s *Server) { s.dynamic = src }
}

// Server implements the PodResourcesLister service.
type Server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer

	devices Devices // nil: no device manager, no devices reported
	pods    Pods
	dynamic DynamicResources // nil: no DRA, no dynamic resources reported
}

// New returns a server over devices (may be nil) and pods.
func New(devices Devices, pods Pods, opts ...Option) *Server {
	s := &Server{devices: devices, pods: pods}
	for _, o := range opts {
		o(s)
	}
	return s
}

// ErrInUse: another process serves the socket already.
var ErrInUse = errors.New("in use by another process")

// Serve listens on the unix socket at path (replacing a stale one, and
// creating its directory; a socket another process answers on is left
// alone: ErrInUse) and serves until ctx ends; the socket is removed
// then. It returns an error only when it cannot listen.
func (s *Server) Serve(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("pod resources socket %s: %w", path, ErrInUse)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(l) // returns when stopped
	}()
	<-ctx.Done()
	g.Stop()
	<-done
	_ = os.Remove(path)
	return nil
}

// List returns the devices of every active pod on the node.
func (s *Server) List(_ context.Context, _ *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	numa := s.numaOf()
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for _, p := range s.activePods() {
		resp.PodResources = append(resp.PodResources, s.podResources(p, numa))
	}
	return resp, nil
}

// Get returns the devices of one pod.
func (s *Server) Get(_ context.Context, r *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	for _, p := range s.activePods() {
		if p.Name == r.GetPodName() && p.Namespace == r.GetPodNamespace() {
			return &podresourcesapi.GetPodResourcesResponse{PodResources: s.podResources(p, s.numaOf())}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", r.GetPodName(), r.GetPodNamespace())
}

// GetAllocatableResources returns the node's healthy devices, grouped by
// resource and NUMA placement. As the kubelet's, it reports device-plugin
// devices only, no DRA devices.
func (s *Server) GetAllocatableResources(_ context.Context, _ *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	resp := &podresourcesapi.AllocatableResourcesResponse{}
	if s.devices == nil {
		return resp, nil
	}
	numa := s.numaOf()
	for _, r := range s.devices.Resources() {
		var ids []string
		for _, d := range r.Devices {
			if d.Healthy {
				ids = append(ids, d.ID)
			}
		}
		resp.Devices = append(resp.Devices, containerDevices(r.Name, ids, numa)...)
	}
	return resp, nil
}

// activePods are the listed pods that have not finished, sorted by
// namespace and name.
func (s *Server) activePods() []*corev1.Pod {
	var out []*corev1.Pod
	if s.pods == nil {
		return nil
	}
	for _, p := range s.pods() {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (s *Server) podResources(p *corev1.Pod, numa map[string]map[string][]int64) *podresourcesapi.PodResources {
	var held map[string]map[string][]string
	if s.devices != nil {
		held = s.devices.PodDevices(string(p.UID))
	}
	pr := &podresourcesapi.PodResources{Name: p.Name, Namespace: p.Namespace}
	for _, c := range p.Spec.Containers {
		cr := &podresourcesapi.ContainerResources{Name: c.Name}
		res := held[c.Name]
		names := make([]string, 0, len(res))
		for name := range res {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			cr.Devices = append(cr.Devices, containerDevices(name, res[name], numa)...)
		}
		if s.dynamic != nil {
			cr.DynamicResources = s.dynamic.ContainerDynamicResources(p, c.Name)
		}
		pr.Containers = append(pr.Containers, cr)
	}
	return pr
}

// numaOf maps resource → device ID → NUMA nodes.
func (s *Server) numaOf() map[string]map[string][]int64 {
	out := map[string]map[string][]int64{}
	if s.devices == nil {
		return out
	}
	for _, r := range s.devices.Resources() {
		m := map[string][]int64{}
		for _, d := range r.Devices {
			m[d.ID] = d.NUMA
		}
		out[r.Name] = m
	}
	return out
}

// containerDevices groups ids of one resource by NUMA placement, as the
// kubelet does: one entry per distinct set of NUMA nodes, devices without
// topology in an entry without it. Entries are sorted by their first ID.
func containerDevices(resource string, ids []string, numa map[string]map[string][]int64) []*podresourcesapi.ContainerDevices {
	if len(ids) == 0 {
		return nil
	}
	byKey := map[string]*podresourcesapi.ContainerDevices{}
	var keys []string
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for _, id := range sorted {
		nodes := numa[resource][id]
		key := fmt.Sprint(nodes)
		cd, ok := byKey[key]
		if !ok {
			cd = &podresourcesapi.ContainerDevices{ResourceName: resource}
			if len(nodes) > 0 {
				cd.Topology = &podresourcesapi.TopologyInfo{}
				for _, n := range nodes {
					cd.Topology.Nodes = append(cd.Topology.Nodes, &podresourcesapi.NUMANode{ID: n})
				}
			}
			byKey[key] = cd
			keys = append(keys, key)
		}
		cd.DeviceIds = append(cd.DeviceIds, id)
	}
	out := make([]*podresourcesapi.ContainerDevices, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}
