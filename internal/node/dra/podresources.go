package dra

import (
	"encoding/json"
	"slices"
	"strings"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
)

// ContainerDynamicResources reports the DRA devices of container for the
// kubelet's PodResources API (ContainerResources.dynamic_resources), from
// the Manager's records (memory, restored from the checkpoint after a
// restart): one DynamicResource per claim the container names in
// resources.claims and that is prepared for the pod, in the order the
// container first names them, then the claim made for its extended
// resources (status.extendedResourceClaimStatus, the requests mapped to
// the container), with the claim's name and namespace and one
// ClaimResource per device, as the kubelet reports them:
//
//   - an allot driver's handle: one per allocated instance, with pool the
//     node's name (the seed pool) and device the instance's v1 device name
//     (resourceconv.SeedDeviceName: "gpu-1/halves/half-0" →
//     "gpu-1--halves--half-0"); then, for a resource.k8s.io/v1 claim, one
//     per network-attached device or share of the handle's data
//     (resourceconv.V1HandleData), with its pool, device and share ID. Each gets the handle's CDI devices, since an
//     allot driver answers them per claim, not per device. Like the
//     container's CDI devices (ContainerOptions), they are not filtered by
//     request: the handle does not say which request an instance serves. A
//     handle with CDI devices and no device it can name (a control-plane
//     controller's allocation) gets one ClaimResource without pool and
//     device.
//   - a kubelet driver's handle: one per device it prepared that serves a
//     request the container names (the whole claim when an entry names no
//     request; see servesRequest), with its pool, device, CDI devices and
//     share ID.
//
// Handles are in the order of their drivers' names, devices in the order
// the allocation or the driver listed them, each once. A claim entry whose
// claim is not created yet, or needs none, is left out, as is a claim not
// (fully) prepared for the pod. Unknown container: nil.
func (m *Manager) ContainerDynamicResources(pod *corev1.Pod, container string) []*podresourcesv1.DynamicResource {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return nil
	}
	// The claims the container names, in order, with the requests it
	// names of each ("" for the whole claim).
	var names []string
	requests := map[string][]string{}
	for _, use := range pod.Spec.Containers[i].Resources.Claims {
		name, known, found := entryClaim(pod, use.Name)
		if !found || !known || name == "" {
			continue
		}
		if _, seen := requests[name]; !seen {
			names = append(names, name)
		}
		requests[name] = append(requests[name], use.Request)
	}
	// The claim made for the container's extended resources, with the
	// requests that serve them.
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		for _, mp := range st.RequestMappings {
			if mp.ContainerName != container || mp.RequestName == "" {
				continue
			}
			name := st.ResourceClaimName
			if _, seen := requests[name]; !seen {
				names = append(names, name)
			}
			requests[name] = append(requests[name], mp.RequestName)
		}
	}
	var out []*podresourcesv1.DynamicResource
	for _, name := range names {
		rec, ok := m.store.find(pod.Namespace, name, pod.UID)
		if !ok || !rec.prepared() {
			continue
		}
		out = append(out, &podresourcesv1.DynamicResource{
			ClaimName:      rec.Name,
			ClaimNamespace: rec.Namespace,
			ClaimResources: m.claimResources(&rec, requests[name]),
		})
	}
	return out
}

// claimResources returns the devices of rec that serve one of requests
// (see ContainerDynamicResources).
func (m *Manager) claimResources(rec *claimRecord, requests []string) []*podresourcesv1.ClaimResource {
	handles := slices.Clone(rec.Handles)
	slices.SortStableFunc(handles, func(a, b handleRecord) int { return strings.Compare(a.Driver, b.Driver) })
	var out []*podresourcesv1.ClaimResource
	type key struct{ driver, pool, device, share string }
	seen := map[key]bool{}
	add := func(driver, pool, device string, share *string, cdi []string) {
		k := key{driver, pool, device, ""}
		if share != nil {
			k.share = "\x00" + *share // set, even if empty
		}
		if seen[k] {
			return
		}
		seen[k] = true
		r := &podresourcesv1.ClaimResource{DriverName: driver, PoolName: pool, DeviceName: device, CdiDevices: cdiDevicesOf(cdi)}
		if share != nil {
			id := *share
			r.ShareId = &id
		}
		out = append(out, r)
	}
	for _, h := range handles {
		if h.Kubelet || len(h.Devices) > 0 { // a kubelet driver's answer
			for _, d := range h.Devices {
				if slices.ContainsFunc(requests, func(req string) bool { return servesRequest(d.Requests, req) }) {
					add(h.Driver, d.Pool, d.Device, d.ShareID, d.CDIDevices)
				}
			}
			continue
		}
		n := len(out)
		for _, id := range instanceIDs(h.Structured) {
			add(h.Driver, m.opts.NodeName, resourceconv.SeedDeviceName(id), nil, h.CDIDevices)
		}
		if rec.Version == versionV1 && h.Data != "" {
			var data resourceconv.V1HandleData
			if err := json.Unmarshal([]byte(h.Data), &data); err == nil {
				for _, d := range data.Devices {
					var share *string
					if d.ShareID != nil {
						id := string(*d.ShareID)
						share = &id
					}
					add(h.Driver, d.Pool, d.Device, share, h.CDIDevices)
				}
			}
		}
		if len(out) == n && len(h.CDIDevices) > 0 {
			add(h.Driver, "", "", nil, h.CDIDevices)
		}
	}
	return out
}

func cdiDevicesOf(ids []string) []*podresourcesv1.CDIDevice {
	if len(ids) == 0 {
		return nil
	}
	out := make([]*podresourcesv1.CDIDevice, 0, len(ids))
	for _, id := range ids {
		out = append(out, &podresourcesv1.CDIDevice{Name: id})
	}
	return out
}
