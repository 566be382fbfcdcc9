package devicemanager

import (
	"context"
	"fmt"
	"sort"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
)

// Admission reasons: every "no" of the device manager is one of these.
const (
	// ReasonPluginNotReady holds a pod: its resource's plugin is known
	// (from the checkpoint, or registering) but not serving yet.
	ReasonPluginNotReady = "DevicePluginNotReady"
	// ReasonResourceUnavailable rejects a pod: the plugin went away.
	ReasonResourceUnavailable = "DeviceResourceUnavailable"
	// ReasonInsufficientDevices rejects a pod: not enough healthy,
	// unallocated devices.
	ReasonInsufficientDevices = "InsufficientDevices"
	// ReasonAllocateFailed rejects a pod: the plugin's Allocate failed.
	ReasonAllocateFailed = "DeviceAllocateFailed"
	// ReasonCheckpointFailed holds a pod: its allocation could not be
	// recorded, so it is undone and tried again.
	ReasonCheckpointFailed = "DeviceCheckpointFailed"
)

// need is one container's request for one device resource.
type need struct {
	container string
	init      bool
	resource  string
	count     int
}

// podNeeds lists the device requests of pod, init containers first, for
// resources a plugin registered (now or before a restart); other
// extended resources are not the device manager's, nor are those the
// pod's binding gave to DRA (status.extendedResourceClaimStatus maps the
// container's resource to a request of its claim): one container never
// gets a resource from both.
func (m *Manager) podNeeds(pod *corev1.Pod) []need {
	var out []need
	byDRA := map[[2]string]bool{}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		for _, mp := range st.RequestMappings {
			byDRA[[2]string{mp.ContainerName, mp.ResourceName}] = true
		}
	}
	add := func(cs []corev1.Container, init bool) {
		for _, c := range cs {
			names := make([]string, 0, len(c.Resources.Limits))
			for name := range c.Resources.Limits {
				names = append(names, string(name))
			}
			for name := range c.Resources.Requests {
				if _, ok := c.Resources.Limits[name]; !ok {
					names = append(names, string(name))
				}
			}
			sort.Strings(names)
			for _, name := range names {
				if _, ok := m.devices.resource(name); !ok || byDRA[[2]string{c.Name, name}] {
					continue
				}
				q, ok := c.Resources.Limits[corev1.ResourceName(name)]
				if !ok {
					q = c.Resources.Requests[corev1.ResourceName(name)]
				}
				if v := corev1.Amount(corev1.ResourceName(name), q); v > 0 {
					out = append(out, need{container: c.Name, init: init, resource: name, count: int(v)})
				}
			}
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

// podDevices is one admission's view of the pod's own devices per
// resource: reusable ones (held by init containers, which have finished
// when the next container starts) and those held for good.
type podDevices struct {
	reusable map[string][]string
	held     map[string]map[string]bool
}

func (p podDevices) record(n need, ids []string) {
	if n.init {
		p.reusable[n.resource] = append(p.reusable[n.resource], ids...)
		return
	}
	if p.held[n.resource] == nil {
		p.held[n.resource] = map[string]bool{}
	}
	for _, id := range ids {
		p.held[n.resource][id] = true
	}
}

// Admit allocates devices to every container of pod that asks for a
// device resource and has none yet. It holds the pod while a plugin it
// needs is not serving, and rejects it when devices cannot be had;
// allocations made by a failed Admit are undone.
func (m *Manager) Admit(ctx context.Context, pod *corev1.Pod) pods.Admission {
	needs := m.podNeeds(pod)
	if len(needs) == 0 {
		return pods.Admitted()
	}
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	uid := string(pod.UID)
	own := podDevices{reusable: map[string][]string{}, held: map[string]map[string]bool{}}
	var made []need
	for _, n := range needs {
		if al, ok := m.allocs.get(uid, n.container, n.resource); ok {
			if ep, _ := m.devices.endpoint(n.resource); ep == nil {
				m.undo(uid, made)
				return pods.HoldPod(ReasonPluginNotReady, fmt.Sprintf(
					"container %s holds %s devices; waiting for their plugin to register", n.container, n.resource))
			}
			own.record(n, al.ids)
			continue
		}
		ids, adm := m.allocate(ctx, uid, n, own)
		if adm.Verdict != pods.Admit {
			m.undo(uid, made)
			return adm
		}
		made = append(made, n)
		own.record(n, ids)
	}
	if len(made) > 0 {
		if err := m.writeCheckpoint(); err != nil {
			m.undo(uid, made)
			return pods.HoldPod(ReasonCheckpointFailed, err.Error())
		}
	}
	return pods.Admitted()
}

func (m *Manager) undo(uid string, made []need) {
	for _, n := range made {
		m.allocs.removeContainer(uid, n.container, n.resource)
	}
}

// allocate chooses devices for one need and calls the plugin's Allocate.
func (m *Manager) allocate(ctx context.Context, uid string, n need, own podDevices) ([]string, pods.Admission) {
	start := time.Now()
	defer func() { m.metrics.allocDuration.WithLabelValues(n.resource).Observe(time.Since(start).Seconds()) }()
	res, _ := m.devices.resource(n.resource)
	switch res.State {
	case StateRestored, StateConnecting:
		return nil, pods.HoldPod(ReasonPluginNotReady, fmt.Sprintf("the device plugin for %s has not registered yet", n.resource))
	case StateRemoved, StateDisconnected:
		return nil, pods.RejectPod(ReasonResourceUnavailable, fmt.Sprintf("the device plugin for %s is not running", n.resource))
	}
	ep, opts := m.devices.endpoint(n.resource)
	if ep == nil {
		return nil, pods.RejectPod(ReasonResourceUnavailable, fmt.Sprintf("the device plugin for %s is not running", n.resource))
	}
	available, must := m.available(res, uid, own)
	if len(available) < n.count {
		return nil, pods.RejectPod(ReasonInsufficientDevices, fmt.Sprintf(
			"container %s asks for %d %s, %d healthy and free", n.container, n.count, n.resource, len(available)))
	}
	if len(must) > n.count {
		must = must[:n.count]
	}
	ids := m.choose(ctx, ep, opts, available, must, n.count)
	resp, err := m.callAllocate(ctx, ep, ids)
	if err != nil {
		return nil, pods.RejectPod(ReasonAllocateFailed, fmt.Sprintf("container %s: %v", n.container, err))
	}
	m.allocs.set(uid, n.container, n.resource, allocation{ids: ids, resp: resp})
	return ids, pods.Admitted()
}

// available lists the healthy devices of res not held by another pod or
// by this pod's earlier containers, and those of them its init
// containers hold (to be reused first).
func (m *Manager) available(res Resource, uid string, own podDevices) ([]Device, []string) {
	used := m.allocs.inUse(res.Name, uid)
	var out []Device
	for _, d := range res.Devices {
		if d.Healthy && !used[d.ID] && !own.held[res.Name][d.ID] {
			out = append(out, d)
		}
	}
	free := map[string]bool{}
	for _, d := range out {
		free[d.ID] = true
	}
	var must []string
	seen := map[string]bool{}
	for _, id := range own.reusable[res.Name] {
		if free[id] && !seen[id] {
			must = append(must, id)
			seen[id] = true
		}
	}
	sort.Strings(must)
	return out, must
}

// choose asks the plugin for its preference when it offers one and
// honours a valid answer; otherwise it prefers devices sharing a NUMA
// node.
func (m *Manager) choose(ctx context.Context, ep *endpoint, opts PluginOptions, available []Device, must []string, n int) []string {
	if len(must) == n {
		return must
	}
	if opts.GetPreferredAllocationAvailable {
		ids, err := m.callPreferred(ctx, ep, available, must, n)
		if err != nil {
			m.log.Warn("device manager: GetPreferredAllocation", "resource", ep.resource, "err", err)
		}
		set := map[string]bool{}
		for _, d := range available {
			set[d.ID] = true
		}
		if err == nil && validPreferred(ids, set, must, n) {
			return ids
		}
	}
	return chooseDevices(available, must, n)
}

func (m *Manager) callPreferred(ctx context.Context, ep *endpoint, available []Device, must []string, n int) ([]string, error) {
	client, err := ep.dial()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(available))
	for i, d := range available {
		ids[i] = d.ID
	}
	ctx, cancel := m.rpcContext(ctx, ep)
	defer cancel()
	resp, err := client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: ids, MustIncludeDeviceIDs: must, AllocationSize: int32(n),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("call plugin: %w", err)
	}
	if len(resp.GetContainerResponses()) != 1 {
		return nil, fmt.Errorf("plugin answered for %d containers, asked for 1", len(resp.GetContainerResponses()))
	}
	return resp.GetContainerResponses()[0].GetDeviceIDs(), nil
}

func (m *Manager) callAllocate(ctx context.Context, ep *endpoint, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	client, err := ep.dial()
	if err != nil {
		return nil, err
	}
	ctx, cancel := m.rpcContext(ctx, ep)
	defer cancel()
	resp, err := client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, fmt.Errorf("allocate %s: %w", ep.resource, err)
	}
	if len(resp.GetContainerResponses()) != 1 {
		return nil, fmt.Errorf("allocate %s: plugin answered for %d containers, asked for 1", ep.resource, len(resp.GetContainerResponses()))
	}
	return resp.GetContainerResponses()[0], nil
}

// Release frees the devices of pod. It is idempotent.
func (m *Manager) Release(_ context.Context, pod *corev1.Pod) error {
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	if !m.allocs.removePod(string(pod.UID)) {
		return nil
	}
	return m.writeCheckpoint()
}
