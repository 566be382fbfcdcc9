package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apiresource "k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
)

// ErrPluginNotServing is returned by ContainerOptions when a plugin that
// asked for PreStartContainer is not serving: the container is not
// started without it (the agent retries with back-off).
var ErrPluginNotServing = errors.New("device plugin is not serving")

// ContainerOptions returns what the plugins' Allocate responses add to
// container c (environment, mounts, device nodes, annotations, CDI
// devices), in resource-name order, after calling PreStartContainer for
// the plugins that require it.
func (m *Manager) ContainerOptions(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (pods.ContainerOptions, error) {
	allocs := m.allocs.container(string(pod.UID), c.Name)
	names := make([]string, 0, len(allocs))
	for res := range allocs {
		names = append(names, res)
	}
	sort.Strings(names)
	var out pods.ContainerOptions
	for _, res := range names {
		al := allocs[res]
		if err := m.preStart(ctx, res, al.ids); err != nil {
			return pods.ContainerOptions{}, fmt.Errorf("container %s: %w", c.Name, err)
		}
		addResponse(&out, al.resp)
	}
	return out, nil
}

func (m *Manager) preStart(ctx context.Context, res string, ids []string) error {
	r, _ := m.devices.resource(res)
	if !r.Options.PreStartRequired {
		return nil
	}
	ep, _ := m.devices.endpoint(res)
	if ep == nil {
		return fmt.Errorf("pre-start %s: %w", res, ErrPluginNotServing)
	}
	client, err := ep.dial()
	if err != nil {
		return fmt.Errorf("pre-start %s: %w", res, err)
	}
	ctx, cancel := m.rpcContext(ctx, ep)
	defer cancel()
	if _, err := client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids}); err != nil {
		return fmt.Errorf("pre-start %s: %w", res, err)
	}
	return nil
}

func addResponse(out *pods.ContainerOptions, r *pluginapi.ContainerAllocateResponse) {
	keys := make([]string, 0, len(r.GetEnvs()))
	for k := range r.GetEnvs() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Env = append(out.Env, k+"="+r.GetEnvs()[k])
	}
	for _, mnt := range r.GetMounts() {
		out.Mounts = append(out.Mounts, runtime.Mount{HostPath: mnt.GetHostPath(), ContainerPath: mnt.GetContainerPath(), ReadOnly: mnt.GetReadOnly()})
	}
	for _, d := range r.GetDevices() {
		out.Devices = append(out.Devices, runtime.Device{HostPath: d.GetHostPath(), ContainerPath: d.GetContainerPath(), Permissions: d.GetPermissions()})
	}
	for k, v := range r.GetAnnotations() {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	for _, d := range r.GetCdiDevices() {
		out.CDIDevices = append(out.CDIDevices, d.GetName())
	}
}

// AllocatedResourcesStatus reports the health of the devices a container
// holds, from memory.
func (m *Manager) AllocatedResourcesStatus(pod *corev1.Pod, container string) []corev1.ResourceStatus {
	allocs := m.allocs.container(string(pod.UID), container)
	var out []corev1.ResourceStatus
	for res, al := range allocs {
		r, _ := m.devices.resource(res)
		healthy := map[string]bool{}
		for _, d := range r.Devices {
			healthy[d.ID] = d.Healthy
		}
		st := corev1.ResourceStatus{Name: res}
		for _, id := range al.ids {
			h := corev1.ResourceHealthStatusUnhealthy
			if healthy[id] {
				h = corev1.ResourceHealthStatusHealthy
			} else if r.State == StateRestored || r.State == StateConnecting {
				h = corev1.ResourceHealthStatusUnknown
			}
			st.Resources = append(st.Resources, corev1.ResourceHealth{ResourceID: id, Health: h})
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Resources returns a snapshot of every resource a plugin registered.
func (m *Manager) Resources() []Resource { return m.devices.snapshot() }

// DecorateNode sets each resource's capacity (all devices) and
// allocatable (healthy devices). A removed resource is advertised as 0,
// as the kubelet does, so that a merge of the status clears it too.
func (m *Manager) DecorateNode(node *corev1.Node) {
	if node.Status.Capacity == nil {
		node.Status.Capacity = corev1.ResourceList{}
	}
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = corev1.ResourceList{}
	}
	for _, r := range m.devices.snapshot() {
		name := corev1.ResourceName(r.Name)
		node.Status.Capacity[name] = *apiresource.NewQuantity(int64(r.Capacity), apiresource.DecimalSI)
		node.Status.Allocatable[name] = *apiresource.NewQuantity(int64(r.Allocatable), apiresource.DecimalSI)
	}
}
