package devicemanager

import (
	"fmt"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// allocation is one container's devices of one resource.
type allocation struct {
	ids  []string
	resp *pluginapi.ContainerAllocateResponse
}

// allocations owns pod UID → container → resource → devices, guarded by
// mu. Responses are never modified once stored.
type allocations struct {
	mu   sync.Mutex
	pods map[string]map[string]map[string]allocation
}

func newAllocations() *allocations {
	return &allocations{pods: map[string]map[string]map[string]allocation{}}
}

func (a *allocations) restore(entries []allocationEntry) error {
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.Response, resp); err != nil {
			return fmt.Errorf("decode allocate response of %s/%s: %w: %w", e.PodUID, e.Container, ErrCorruptCheckpoint, err)
		}
		a.set(e.PodUID, e.Container, e.Resource, allocation{ids: e.DeviceIDs, resp: resp})
	}
	return nil
}

func (a *allocations) set(pod, container, res string, al allocation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pods[pod] == nil {
		a.pods[pod] = map[string]map[string]allocation{}
	}
	if a.pods[pod][container] == nil {
		a.pods[pod][container] = map[string]allocation{}
	}
	a.pods[pod][container][res] = al
}

func (a *allocations) get(pod, container, res string) (allocation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.pods[pod][container][res]
	return al, ok
}

// container returns a copy of one container's allocations by resource.
func (a *allocations) container(pod, container string) map[string]allocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]allocation{}
	for res, al := range a.pods[pod][container] {
		out[res] = al
	}
	return out
}

func (a *allocations) removePod(pod string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.pods[pod]
	delete(a.pods, pod)
	return ok
}

func (a *allocations) removeContainer(pod, container, res string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pods[pod][container], res)
	if len(a.pods[pod][container]) == 0 {
		delete(a.pods[pod], container)
	}
	if len(a.pods[pod]) == 0 {
		delete(a.pods, pod)
	}
}

// inUse returns the devices of res held by any pod except except.
func (a *allocations) inUse(res, except string) map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	used := map[string]bool{}
	for pod, cs := range a.pods {
		if pod == except {
			continue
		}
		for _, rs := range cs {
			for _, id := range rs[res].ids {
				used[id] = true
			}
		}
	}
	return used
}

// podsHolding returns the UIDs of the pods holding devices of res.
func (a *allocations) podsHolding(res string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for pod, cs := range a.pods {
		for _, rs := range cs {
			if len(rs[res].ids) > 0 {
				out = append(out, pod)
				break
			}
		}
	}
	return out
}

// entries lists every allocation for the checkpoint, in a stable order.
func (a *allocations) entries() ([]allocationEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []allocationEntry
	for pod, cs := range a.pods {
		for c, rs := range cs {
			for res, al := range rs {
				data, err := proto.Marshal(al.resp)
				if err != nil {
					return nil, fmt.Errorf("encode allocate response of %s/%s: %w", pod, c, err)
				}
				out = append(out, allocationEntry{PodUID: pod, Container: c, Resource: res, DeviceIDs: al.ids, Response: data})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.PodUID != y.PodUID {
			return x.PodUID < y.PodUID
		}
		if x.Container != y.Container {
			return x.Container < y.Container
		}
		return x.Resource < y.Resource
	})
	return out, nil
}

// PodDevices returns the devices allocated to a pod: container →
// resource → device IDs. The caller owns the result (for the
// PodResources API).
func (m *Manager) PodDevices(podUID string) map[string]map[string][]string {
	m.allocs.mu.Lock()
	defer m.allocs.mu.Unlock()
	out := map[string]map[string][]string{}
	for c, rs := range m.allocs.pods[podUID] {
		out[c] = map[string][]string{}
		for res, al := range rs {
			out[c][res] = append([]string(nil), al.ids...)
		}
	}
	return out
}
