package dra

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/node/pods"
)

// instanceHealth owns the health of the registered drivers' instances,
// from each driver's last valid model: driver → instance ID (the
// allocator's, "gpu-1/halves/half-0") → healthy. An instance is unhealthy
// when it or an ancestor is Unhealthy, as for the allocator. Guarded by
// mu.
type instanceHealth struct {
	mu      sync.Mutex
	drivers map[string]map[string]bool
}

func newInstanceHealth() *instanceHealth {
	return &instanceHealth{drivers: map[string]map[string]bool{}}
}

// set records driver's model and reports whether any instance's health
// changed (appeared, went or flipped).
func (h *instanceHealth) set(driver string, model *resourcev1alpha2.NodeResourceModel) bool {
	next := map[string]bool{}
	if p := model.Partitionable; p != nil {
		addHealth(next, "", p.ResourceInstances, true)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, had := h.drivers[driver]
	h.drivers[driver] = next
	return !had || !mapsEqual(prev, next)
}

func addHealth(out map[string]bool, prefix string, list []resourcev1alpha2.ResourceInstance, parentHealthy bool) {
	for _, in := range list {
		id := prefix + in.Name
		healthy := parentHealthy && (in.Health == "" || in.Health == resourcev1alpha2.InstanceHealthy)
		out[id] = healthy
		for _, g := range in.Partitions {
			addHealth(out, id+"/"+g.Name+"/", g.ResourceInstances, healthy)
		}
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// forget drops driver's health (it went away: its instances' health is
// unknown) and reports whether it had any.
func (h *instanceHealth) forget(driver string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, had := h.drivers[driver]
	delete(h.drivers, driver)
	return had
}

// of returns the health of driver's instance id: Unknown while the driver
// is not registered or its model lacks the instance.
func (h *instanceHealth) of(driver, id string) corev1.ResourceHealthStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	healthy, ok := h.drivers[driver][id]
	switch {
	case !ok:
		return corev1.ResourceHealthStatusUnknown
	case healthy:
		return corev1.ResourceHealthStatusHealthy
	}
	return corev1.ResourceHealthStatusUnhealthy
}

// instanceIDs returns the instances a structured handle allocates. The
// JSON was encoded by claimHandles from the API's StructuredResourceHandle
// (or restored from a checksummed checkpoint of it); one that cannot be
// decoded allocates no instance the Manager can report on.
func instanceIDs(structured json.RawMessage) []string {
	if len(structured) == 0 {
		return nil
	}
	var h resourcev1alpha2.StructuredResourceHandle
	if err := json.Unmarshal(structured, &h); err != nil || h.Partitionable == nil {
		return nil
	}
	out := make([]string, 0, len(h.Partitionable.Instances))
	for _, in := range h.Partitionable.Instances {
		out = append(out, in.ID)
	}
	return out
}

// healthChanged wakes the pods holding claims of driver: their status, and
// PodFailure, may have changed.
func (m *Manager) healthChanged(driver string) {
	for _, uid := range m.store.podsOfDriver(driver) {
		m.opts.Wake(uid)
	}
}

// AllocatedResourcesStatus reports the health of the instances of the
// claims container uses (its resources.claims), from memory: one entry
// named "claim:ENTRY" (or "claim:ENTRY/REQUEST" when the container names a
// request of the claim) per claim prepared for the pod, one resource per
// allocated instance of an allot driver with ID "DRIVER/INSTANCE"
// ("gpu.example.com/gpu-0") and per device of a kubelet driver serving
// the request with ID "DRIVER/POOL/DEVICE", as the kubelet names them.
// The health is the one the driver last streamed: Unknown while the
// driver is not registered (after it went away, or before it registered
// again after an agent restart), and for a kubelet driver's device also
// once its report's timeout passed. Claims without structured allocations
// (a control-plane controller's) name no instances and are left out.
func (m *Manager) AllocatedResourcesStatus(pod *corev1.Pod, container string) []corev1.ResourceStatus {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return nil
	}
	var out []corev1.ResourceStatus
	for _, use := range pod.Spec.Containers[i].Resources.Claims {
		name, known, found := entryClaim(pod, use.Name)
		if !found || !known || name == "" {
			continue
		}
		rec, ok := m.store.find(pod.Namespace, name, pod.UID)
		if !ok {
			continue
		}
		st := corev1.ResourceStatus{Name: "claim:" + use.Name}
		if use.Request != "" {
			st.Name += "/" + use.Request
		}
		now := time.Now()
		for _, h := range rec.Handles {
			for _, id := range instanceIDs(h.Structured) {
				st.Resources = append(st.Resources, corev1.ResourceHealth{ResourceID: h.Driver + "/" + id, Health: m.health.of(h.Driver, id)})
			}
			for _, d := range h.Devices {
				if servesRequest(d.Requests, use.Request) {
					health, _ := m.devHealth.of(h.Driver, d.Pool, d.Device, now)
					st.Resources = append(st.Resources, corev1.ResourceHealth{ResourceID: h.Driver + "/" + d.Pool + "/" + d.Device, Health: health})
				}
			}
		}
		if len(st.Resources) > 0 {
			out = append(out, st)
		}
	}
	return out
}

// PodFailure fails a pod one of whose prepared claims holds an instance
// its driver reports Unhealthy (the instance or an ancestor has
// health: Unhealthy in the driver's model), or a device a kubelet driver's
// health stream reports UNHEALTHY (never UNKNOWN, nor a report past its
// timeout), as the device manager does for
// a device plugin's unhealthy device (seed 001). A driver that went away
// fails nothing. The agent puts the Manager among the pods.Hooks Monitors
// only under the FailPod policy.
func (m *Manager) PodFailure(pod *corev1.Pod) *pods.Failure {
	now := time.Now()
	for _, rec := range m.store.podRecords(pod.UID) {
		for _, h := range rec.Handles {
			for _, id := range instanceIDs(h.Structured) {
				if m.health.of(h.Driver, id) == corev1.ResourceHealthStatusUnhealthy {
					return &pods.Failure{Reason: pods.ReasonDeviceUnhealthy, Message: fmt.Sprintf(
						"instance %s of claim %s/%s was reported unhealthy by DRA driver %s", id, rec.Namespace, rec.Name, h.Driver)}
				}
			}
			for _, d := range h.Devices {
				if health, msg := m.devHealth.of(h.Driver, d.Pool, d.Device, now); health == corev1.ResourceHealthStatusUnhealthy {
					text := fmt.Sprintf("device %s/%s of claim %s/%s was reported unhealthy by DRA driver %s", d.Pool, d.Device, rec.Namespace, rec.Name, h.Driver)
					if msg != "" {
						text += ": " + msg
					}
					return &pods.Failure{Reason: pods.ReasonDeviceUnhealthy, Message: text}
				}
			}
		}
	}
	return nil
}

// podRecords returns copies of the records of the claims pod uses, sorted
// by claim UID.
func (s *claimStore) podRecords(podUID types.UID) []claimRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []claimRecord
	for _, rec := range s.claims {
		if rec.hasPod(podUID) {
			out = append(out, rec.clone())
		}
	}
	slices.SortFunc(out, func(a, b claimRecord) int {
		switch {
		case a.UID < b.UID:
			return -1
		case a.UID > b.UID:
			return 1
		}
		return 0
	})
	return out
}

// podsOfDriver returns the pods using a claim with a handle of driver.
func (s *claimStore) podsOfDriver(driver string) []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[types.UID]bool{}
	var out []types.UID
	for _, rec := range s.claims {
		if rec.handle(driver) == nil {
			continue
		}
		for _, p := range rec.Pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				out = append(out, p.UID)
			}
		}
	}
	return out
}
