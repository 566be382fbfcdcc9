package deviceplugin

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// plugin serves the DevicePlugin service for the configured devices.
// Health is the only mutable state, guarded by mu; every change closes
// changed so ListAndWatch streams resend.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg  deviceFile
	byID map[string]device
	log  *slog.Logger

	mu        sync.Mutex
	unhealthy map[string]bool
	changed   chan struct{}
}

func newPlugin(cfg deviceFile, log *slog.Logger) *plugin {
	p := &plugin{cfg: cfg, byID: map[string]device{}, log: log, unhealthy: map[string]bool{}, changed: make(chan struct{})}
	for _, d := range cfg.Devices {
		p.byID[d.ID] = d
	}
	return p
}

// setUnhealthy replaces the set of unhealthy devices.
func (p *plugin) setUnhealthy(ids map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mapsEqual(p.unhealthy, ids) {
		return
	}
	p.unhealthy = ids
	close(p.changed)
	p.changed = make(chan struct{})
	p.log.Info("health changed", "unhealthy", sortedKeys(ids))
}

// toggleAll flips every device's health (SIGUSR1).
func (p *plugin) toggleAll() {
	p.mu.Lock()
	next := map[string]bool{}
	for _, d := range p.cfg.Devices {
		if !p.unhealthy[d.ID] {
			next[d.ID] = true
		}
	}
	p.mu.Unlock()
	p.setUnhealthy(next)
}

func (p *plugin) devices() ([]*pluginapi.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pluginapi.Device, 0, len(p.cfg.Devices))
	for _, d := range p.cfg.Devices {
		pd := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if p.unhealthy[d.ID] {
			pd.Health = pluginapi.Unhealthy
		}
		if d.NUMA != nil {
			pd.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: *d.NUMA}}}
		}
		out = append(out, pd)
	}
	return out, p.changed
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: p.cfg.PreStartRequired, GetPreferredAllocationAvailable: true}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		devs, changed := p.devices()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("send devices: %w", err)
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation keeps a container on one NUMA node when it can:
// the must-include devices, then available devices on their NUMA node,
// then the others, each group in ID order.
func (p *plugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range r.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses,
			&pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: p.prefer(c)})
	}
	return resp, nil
}

func (p *plugin) prefer(c *pluginapi.ContainerPreferredAllocationRequest) []string {
	chosen := slices.Clone(c.MustIncludeDeviceIDs)
	rest := slices.DeleteFunc(slices.Clone(c.AvailableDeviceIDs), func(id string) bool { return slices.Contains(chosen, id) })
	numa := func(id string) int64 {
		if d, ok := p.byID[id]; ok && d.NUMA != nil {
			return *d.NUMA
		}
		return -1
	}
	want := int64(-1)
	if len(chosen) > 0 {
		want = numa(chosen[0])
	} else if len(rest) > 0 {
		want = p.fullestNode(rest, int(c.AllocationSize))
	}
	sort.SliceStable(rest, func(i, j int) bool {
		a, b := numa(rest[i]) == want, numa(rest[j]) == want
		if a != b {
			return a
		}
		return rest[i] < rest[j]
	})
	for _, id := range rest {
		if len(chosen) >= int(c.AllocationSize) {
			break
		}
		chosen = append(chosen, id)
	}
	return chosen
}

// fullestNode returns the NUMA node to allocate n of ids from: the
// smallest that holds n (keeping larger nodes whole), else the fullest.
func (p *plugin) fullestNode(ids []string, n int) int64 {
	count := map[int64]int{}
	for _, id := range ids {
		if d := p.byID[id]; d.NUMA != nil {
			count[*d.NUMA]++
		}
	}
	nodes := make([]int64, 0, len(count))
	for node := range count {
		nodes = append(nodes, node)
	}
	sort.Slice(nodes, func(i, j int) bool {
		a, b := count[nodes[i]], count[nodes[j]]
		switch {
		case (a >= n) != (b >= n):
			return a >= n
		case a >= n && a != b:
			return a < b
		case a != b:
			return a > b
		}
		return nodes[i] < nodes[j]
	})
	if len(nodes) == 0 {
		return -1
	}
	return nodes[0]
}

// Allocate exposes the devices' nodes, and tells the container which it
// has through EXAMPLE_DEVICES (and CDI names when configured).
func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		cr := &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"EXAMPLE_DEVICES": strings.Join(c.DevicesIds, ",")},
		}
		for _, id := range c.DevicesIds {
			d, ok := p.byID[id]
			if !ok {
				return nil, fmt.Errorf("allocate: unknown device %q", id)
			}
			if d.Path != "" {
				cr.Devices = append(cr.Devices, &pluginapi.DeviceSpec{HostPath: d.Path, ContainerPath: d.ContainerPath, Permissions: "rw"})
			}
			if p.cfg.CDIKind != "" {
				cr.CdiDevices = append(cr.CdiDevices, &pluginapi.CDIDevice{Name: p.cfg.CDIKind + "=" + id})
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
		p.log.Info("allocated", "devices", c.DevicesIds)
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.log.Info("pre-start", "devices", r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
