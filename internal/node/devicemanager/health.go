package devicemanager

import (
	"fmt"
	"sort"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
)

// PodFailure fails a pod one of whose containers (not init containers,
// whose devices the containers reuse or that have finished) holds a
// device its plugin reports Unhealthy in ListAndWatch: seed 001, "If a
// device fails, the Device Plugin should signal that through the
// ListAndWatch gRPC stream. We then expect Kubelet to fail the Pod." A
// plugin that went away (its devices count as unhealthy in capacity and
// in the pods' status) fails nothing: seed 001 does not expect running
// pods to be touched then. The agent puts the Manager among the pods.Hooks
// Monitors only under the FailPod policy.
func (m *Manager) PodFailure(pod *corev1.Pod) *pods.Failure {
	for _, c := range pod.Spec.Containers {
		allocs := m.allocs.container(string(pod.UID), c.Name)
		names := make([]string, 0, len(allocs))
		for res := range allocs {
			names = append(names, res)
		}
		sort.Strings(names)
		for _, res := range names {
			if id, ok := m.unhealthyDevice(res, allocs[res].ids); ok {
				return &pods.Failure{Reason: pods.ReasonDeviceUnhealthy, Message: fmt.Sprintf(
					"device %s of %s, held by container %s, was reported unhealthy by its device plugin", id, res, c.Name)}
			}
		}
	}
	return nil
}

// unhealthyDevice returns the first of ids that the serving plugin of res
// reports unhealthy.
func (m *Manager) unhealthyDevice(res string, ids []string) (string, bool) {
	r, ok := m.devices.resource(res)
	if !ok || r.State != StateServing {
		return "", false
	}
	for _, id := range ids {
		i := sort.Search(len(r.Devices), func(i int) bool { return r.Devices[i].ID >= id })
		if i < len(r.Devices) && r.Devices[i].ID == id && !r.Devices[i].Healthy {
			return id, true
		}
	}
	return "", false
}
