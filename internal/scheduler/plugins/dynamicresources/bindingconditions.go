package dynamicresources

import (
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator"
	"allot.dev/allot/pkg/allocator/engine"
)

// Binding conditions (KEP-5007, DRADeviceBindingConditions): a device
// with bindingConditions is allocated like any other, its results carry
// the conditions, and the pod is bound only once the claim's
// status.devices shows every one of them True. The scheduler then binds
// in two steps: the claims first (a Binding with ClaimsOnly, under the
// same fences), the pod once the conditions hold. These functions are the
// pure side of that; the scheduler extension (package dra) waits and
// writes.

// ReasonBindingConditions is the reason of a pod whose binding waits for,
// or failed on, its devices' binding conditions.
const ReasonBindingConditions = "BindingConditions"

// BindingClaims returns the pod's claims, as Reserve chose them, whose
// new allocations hold devices with binding conditions: nil when the pod
// is bound in one step.
func BindingClaims(state *framework.CycleState) []*resourcev1.ResourceClaim {
	if s, ok := readState(state); !ok || s.committed {
		return nil
	}
	return CommittedBindingClaims(state)
}

// CommittedBindingClaims is BindingClaims whether or not ClaimsCommitted
// was called: the claims a pod waits for, or whose first step is to be
// undone.
func CommittedBindingClaims(state *framework.CycleState) []*resourcev1.ResourceClaim {
	s, ok := readState(state)
	if !ok || s.v1 == nil {
		return nil
	}
	var out []*resourcev1.ResourceClaim
	for i, c := range s.v1.chosen {
		// A claim allocated earlier (for another pod) whose conditions are
		// not all True yet is waited for too, as Kubernetes does.
		if HasBindingConditions(c) && (s.v1.newly[i] || !conditionsMet(c)) {
			out = append(out, c)
		}
	}
	return out
}

// conditionsMet reports whether every binding condition of the claim's
// allocation is True in its status.
func conditionsMet(c *resourcev1.ResourceClaim) bool {
	for _, r := range c.Status.Allocation.Devices.Results {
		st := deviceStatus(c, r)
		for _, t := range r.BindingConditions {
			if st == nil || !meta.IsStatusConditionTrue(st.Conditions, t) {
				return false
			}
		}
	}
	return true
}

// HasBindingConditions reports whether a claim's allocation has a device
// with binding conditions.
func HasBindingConditions(c *resourcev1.ResourceClaim) bool {
	if c == nil || c.Status.Allocation == nil {
		return false
	}
	return slices.ContainsFunc(c.Status.Allocation.Devices.Results, func(r resourcev1.DeviceRequestAllocationResult) bool {
		return len(r.BindingConditions) > 0
	})
}

// ClaimsCommitted records that the first step committed the pod's claims:
// the binding that follows only reserves them (no allocations, no
// resourceVersions, no fences).
func ClaimsCommitted(state *framework.CycleState) {
	if s, ok := readState(state); ok {
		s.committed = true
	}
}

// BindingWaitMessage says what the pod waits for: each device with
// binding conditions and the conditions not True yet in cur (the claims
// as they are now, by name; a claim missing there waits for all).
func BindingWaitMessage(claims []*resourcev1.ResourceClaim, cur map[string]*resourcev1.ResourceClaim) string {
	var parts []string
	for _, c := range claims {
		for _, r := range c.Status.Allocation.Devices.Results {
			if len(r.BindingConditions) == 0 {
				continue
			}
			var missing []string
			st := deviceStatus(cur[c.Name], r)
			for _, t := range r.BindingConditions {
				if st == nil || !meta.IsStatusConditionTrue(st.Conditions, t) {
					missing = append(missing, t)
				}
			}
			if len(missing) > 0 {
				parts = append(parts, fmt.Sprintf("claim %s device %s/%s/%s: %s", c.Name, r.Driver, r.Pool, r.Device, strings.Join(missing, ", ")))
			}
		}
	}
	if len(parts) == 0 {
		return "binding conditions are met"
	}
	return "waiting for binding conditions: " + strings.Join(parts, "; ")
}

// BindingVerdict judges a claim the pod waits for: chosen is the claim as
// the first step committed it, cur the claim as it is now (nil: deleted),
// objs the current DRA objects (for the devices' taints; nil skips that
// check). It returns whether every binding condition is True, or why the
// binding must be given up: the claim deleted or replaced, its
// allocation or the pod's reservation gone, a binding failure condition
// True, or a device now tainted NoSchedule or NoExecute without a
// toleration in its result.
func BindingVerdict(pod *corev1.Pod, chosen, cur *resourcev1.ResourceClaim, objs *Objects) (ready bool, failure error) {
	switch {
	case cur == nil || cur.UID != chosen.UID:
		return false, fmt.Errorf("claim %s was deleted while the pod waited for its binding conditions", chosen.Name)
	case cur.DeletionTimestamp != nil:
		return false, fmt.Errorf("claim %s is being deleted", chosen.Name)
	case cur.Status.Allocation == nil || !sameDevices(cur.Status.Allocation, chosen.Status.Allocation):
		return false, fmt.Errorf("claim %s was deallocated while the pod waited for its binding conditions", chosen.Name)
	case !slices.ContainsFunc(cur.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }):
		return false, fmt.Errorf("claim %s is no longer reserved for the pod", chosen.Name)
	}
	var inv *engine.Inventory
	if objs != nil && objs.v1 != nil {
		inv = objs.v1.inventory()
	}
	ready = true
	for _, r := range cur.Status.Allocation.Devices.Results {
		st := deviceStatus(cur, r)
		if st != nil {
			for _, t := range r.BindingFailureConditions {
				if meta.IsStatusConditionTrue(st.Conditions, t) {
					return false, fmt.Errorf("claim %s device %s/%s/%s: binding failure condition %s is True", cur.Name, r.Driver, r.Pool, r.Device, t)
				}
			}
		}
		for _, t := range r.BindingConditions {
			if st == nil || !meta.IsStatusConditionTrue(st.Conditions, t) {
				ready = false
			}
		}
		if t := untoleratedTaint(inv, r); t != nil {
			return false, fmt.Errorf("claim %s device %s/%s/%s was tainted %s=%s:%s while the pod waited for its binding conditions",
				cur.Name, r.Driver, r.Pool, r.Device, t.Key, t.Value, t.Effect)
		}
	}
	return ready, nil
}

// PastCommit reports whether cur (a view of the claim, nil when absent)
// is past the first step that committed chosen: the step checked the
// claim's resourceVersion as the cycle saw it (chosen's), so any other
// version, or no claim, comes after it. A view still at that version lags
// behind the binding and cannot be judged.
// A view that shows the allocation reserved for the pod is recent enough
// too (the first step may have changed nothing: a retry finding its own
// reservation).
func PastCommit(cur, chosen *resourcev1.ResourceClaim, pod *corev1.Pod) bool {
	if cur == nil || cur.UID != chosen.UID || cur.ResourceVersion != chosen.ResourceVersion {
		return true
	}
	return cur.Status.Allocation != nil && chosen.Status.Allocation != nil && sameDevices(cur.Status.Allocation, chosen.Status.Allocation) &&
		slices.ContainsFunc(cur.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID })
}

// deviceStatus is the claim's status.devices entry of a result, or nil.
func deviceStatus(c *resourcev1.ResourceClaim, r resourcev1.DeviceRequestAllocationResult) *resourcev1.AllocatedDeviceStatus {
	if c == nil {
		return nil
	}
	for i := range c.Status.Devices {
		d := &c.Status.Devices[i]
		if d.Driver != r.Driver || d.Pool != r.Pool || d.Device != r.Device {
			continue
		}
		if (d.ShareID == nil) != (r.ShareID == nil) || (d.ShareID != nil && *d.ShareID != string(*r.ShareID)) {
			continue
		}
		return d
	}
	return nil
}

// sameDevices reports whether two allocations hold the same devices.
func sameDevices(a, b *resourcev1.AllocationResult) bool {
	key := func(r resourcev1.DeviceRequestAllocationResult) string {
		s := r.Request + "/" + r.Driver + "/" + r.Pool + "/" + r.Device
		if r.ShareID != nil {
			s += "/" + string(*r.ShareID)
		}
		return s
	}
	if len(a.Devices.Results) != len(b.Devices.Results) {
		return false
	}
	for i := range a.Devices.Results {
		if key(a.Devices.Results[i]) != key(b.Devices.Results[i]) {
			return false
		}
	}
	return true
}

// untoleratedTaint returns a NoSchedule or NoExecute taint of the result's
// device (as the inventory has it, DeviceTaintRules included) that the
// result's tolerations do not tolerate.
func untoleratedTaint(inv *engine.Inventory, r resourcev1.DeviceRequestAllocationResult) *resourcev1.DeviceTaint {
	if inv == nil {
		return nil
	}
	for _, p := range inv.Pools() {
		if p.Driver != r.Driver || p.Name != r.Pool {
			continue
		}
		for i := range p.Devices {
			d := &p.Devices[i]
			if d.Name != r.Device {
				continue
			}
			for j := range d.Taints {
				t := &d.Taints[j]
				if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
					continue
				}
				if !slices.ContainsFunc(r.Tolerations, func(tol resourcev1.DeviceToleration) bool { return allocator.ToleratesTaint(tol, *t) }) {
					return t
				}
			}
			return nil
		}
	}
	return nil
}

// ReleaseClaim is the status write that undoes a first step whose binding
// failed: cur is the claim as stored, chosen as the first step committed
// it. The pod's reservation is dropped; when no other consumer is left
// and the allocation is still the pod's, the allocation and the status
// of its devices go too. changed is false when there is nothing to undo
// (another claim of that name, or neither reserved for the pod nor
// allocated as chosen).
func ReleaseClaim(cur, chosen *resourcev1.ResourceClaim, pod *corev1.Pod) (upd *resourcev1.ResourceClaim, changed bool) {
	if cur.UID != chosen.UID {
		return nil, false
	}
	upd = cur.DeepCopy()
	upd.Status.ReservedFor = slices.DeleteFunc(upd.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID })
	changed = len(upd.Status.ReservedFor) != len(cur.Status.ReservedFor)
	if len(upd.Status.ReservedFor) == 0 && upd.Status.Allocation != nil && sameDevices(upd.Status.Allocation, chosen.Status.Allocation) {
		upd.Status.Allocation = nil
		upd.Status.Devices = nil
		changed = true
	}
	return upd, changed
}
