package dra

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/pods"
)

// ContainerOptions gives container c the CDI devices of the claims it
// names in resources.claims (only those of the named request when an
// entry names one; see claimRecord.cdiDevices), each once, from the Manager's records (memory, restored
// from the checkpoint after a restart), so a container of an adopted pod
// that restarts gets them without asking any driver. A claim that is not
// prepared for the pod is an error: the container is not created without
// its devices.
func (m *Manager) ContainerOptions(_ context.Context, pod *corev1.Pod, c *corev1.Container) (pods.ContainerOptions, error) {
	var devices []string
	for _, use := range c.Resources.Claims {
		name, known, found := entryClaim(pod, use.Name)
		switch {
		case !found:
			return pods.ContainerOptions{}, fmt.Errorf("container %s uses claim %q, which is not in the pod's spec.resourceClaims", c.Name, use.Name)
		case !known:
			return pods.ContainerOptions{}, fmt.Errorf("container %s: the claim of entry %q is not created yet", c.Name, use.Name)
		case name == "":
			continue // the entry needs no claim
		}
		rec, ok := m.store.find(pod.Namespace, name, pod.UID)
		if !ok || !rec.prepared() {
			return pods.ContainerOptions{}, fmt.Errorf("container %s: claim %s/%s is not prepared for the pod", c.Name, pod.Namespace, name)
		}
		for _, d := range rec.cdiDevices(use.Request) {
			if !slices.Contains(devices, d) {
				devices = append(devices, d)
			}
		}
	}
	// The extended resources DRA serves this container: the devices of
	// the requests status.extendedResourceClaimStatus maps to it.
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		for _, mp := range st.RequestMappings {
			if mp.ContainerName != c.Name {
				continue
			}
			rec, ok := m.store.find(pod.Namespace, st.ResourceClaimName, pod.UID)
			if !ok || !rec.prepared() {
				return pods.ContainerOptions{}, fmt.Errorf("container %s: claim %s/%s of its extended resource %s is not prepared for the pod",
					c.Name, pod.Namespace, st.ResourceClaimName, mp.ResourceName)
			}
			for _, d := range rec.cdiDevices(mp.RequestName) {
				if !slices.Contains(devices, d) {
					devices = append(devices, d)
				}
			}
		}
	}
	return pods.ContainerOptions{CDIDevices: devices}, nil
}

// HoldsMultiNode reports whether the pod uses a claim prepared here that
// holds devices other nodes can reach: the node agent fences such pods.
func (m *Manager) HoldsMultiNode(podUID types.UID) bool {
	for _, rec := range m.store.podRecords(podUID) {
		if rec.MultiNode {
			return true
		}
	}
	return false
}

// PreparedPods returns the UIDs of the pods the Manager holds prepared
// claims for (from its checkpoint).
func (m *Manager) PreparedPods() []types.UID {
	keys := m.store.pods()
	out := make([]types.UID, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.UID)
	}
	return out
}
