package allocator

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/engine"
	resourcev1 "k8s.io/api/resource/v1"
)

// DeviceTaintRules (resource.k8s.io/v1) taint the devices they select in
// the one device inventory, whichever API publishes them: a v1 device by
// its driver, pool and name, a seed leaf by its projection (driver, the
// node as pool, SeedDeviceName of its instance ID). The taint is added to
// the device's taints as if its slice had published it, in rule name
// order after the slice's own:
//
//   - NoSchedule and NoExecute: the device is not allocated to a request
//     that does not tolerate the taint (v1 tolerations). Seed requests
//     have no tolerations, so a seed leaf with such a taint is not
//     allocatable to seed claims (explain names the taint and the rule).
//     Claims already allocated keep their devices: eviction (NoExecute)
//     is the controller manager's (internal/controller/devicetainteviction).
//   - None, and effects this allocator does not know: shown on the
//     device (Pool devices' Taints), no effect on allocation, as
//     Kubernetes treats unknown effects.

// DeviceRuleTaint is one taint a DeviceTaintRule puts on a device.
type DeviceRuleTaint struct {
	Rule  string // the DeviceTaintRule's name
	Taint resourcev1.DeviceTaint
}

func (t DeviceRuleTaint) String() string {
	return fmt.Sprintf("%s=%s:%s (DeviceTaintRule %s)", t.Taint.Key, t.Taint.Value, t.Taint.Effect, t.Rule)
}

// TaintRuleSelects reports whether a DeviceTaintRule selects the device:
// Kubernetes 1.37's spec.deviceSelector, whose driver, pool and device
// must each equal the device's when set. A rule without a selector
// selects no device; an empty selector selects every device.
func TaintRuleSelects(rule *resourcev1.DeviceTaintRule, driver, pool, device string) bool {
	if rule == nil || rule.DeletionTimestamp != nil {
		return false
	}
	sel := rule.Spec.DeviceSelector
	if sel == nil {
		return false
	}
	return (sel.Driver == nil || *sel.Driver == driver) &&
		(sel.Pool == nil || *sel.Pool == pool) &&
		(sel.Device == nil || *sel.Device == device)
}

// ToleratesTaint reports whether a v1 toleration matches a taint by
// Kubernetes' rule (the allocator's own check): an empty effect or key
// matches any, Exists any value, Equal the same value. What the effect
// means is the caller's: device taint eviction uses it for NoExecute.
func ToleratesTaint(tol resourcev1.DeviceToleration, t resourcev1.DeviceTaint) bool {
	return engine.Tolerates(tol, &t)
}

// blocksScheduling reports whether a taint keeps a device from requests
// that do not tolerate it.
func blocksScheduling(t *resourcev1.DeviceTaint) bool {
	return t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute
}

// sortedRules returns the rules that can select anything, by name, so that
// taints are added in a fixed order whatever the listing order.
func sortedRules(rules []*resourcev1.DeviceTaintRule) []*resourcev1.DeviceTaintRule {
	out := make([]*resourcev1.DeviceTaintRule, 0, len(rules))
	for _, r := range rules {
		if r != nil && r.DeletionTimestamp == nil && r.Spec.DeviceSelector != nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *resourcev1.DeviceTaintRule) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ruleTaints returns the taints the rules put on one device, or nil.
func ruleTaints(rules []*resourcev1.DeviceTaintRule, driver, pool, device string) []DeviceRuleTaint {
	var out []DeviceRuleTaint
	for _, r := range rules {
		if TaintRuleSelects(r, driver, pool, device) {
			out = append(out, DeviceRuleTaint{Rule: r.Name, Taint: r.Spec.Taint})
		}
	}
	return out
}

// NewModelTainted is NewModel with the DeviceTaintRules applied to the
// node's seed leaves: a leaf selected by a rule with effect NoSchedule or
// NoExecute is not allocatable to seed claims, and explain says which
// taint keeps it (ReasonTainted); the v1 projection of the leaf
// (SeedDevices, NewInventoryModels) carries every rule's taint, for v1
// requests to tolerate. With no rule selecting a leaf of the node it
// equals NewModel.
func NewModelTainted(nodeName string, slices []*resourceapi.NodeResourceSlice, rules []*resourcev1.DeviceTaintRule) *Model {
	m := NewModel(nodeName, slices)
	rules = sortedRules(rules)
	if len(rules) == 0 {
		return m
	}
	for _, dm := range m.drivers {
		for _, x := range dm.leaves {
			in := &dm.insts[x]
			in.taints = ruleTaints(rules, dm.driver, nodeName, SeedDeviceName(in.id))
			if !in.ok {
				continue
			}
			for i := range in.taints {
				if blocksScheduling(&in.taints[i].Taint) {
					in.ok, in.tainted = false, true
					break
				}
			}
		}
	}
	return m
}

// firstBlocking returns the first taint of a leaf that keeps it from seed
// claims.
func firstBlocking(ts []DeviceRuleTaint) (DeviceRuleTaint, bool) {
	for _, t := range ts {
		if blocksScheduling(&t.Taint) {
			return t, true
		}
	}
	return DeviceRuleTaint{}, false
}

// applyTaintRules adds the rules' taints to the devices of published v1
// pools (projected seed pools take theirs from the Model). Devices are
// copied, never changed: their maps and lists are shared with the slices.
func applyTaintRules(pools []engine.Pool, rules []*resourcev1.DeviceTaintRule) {
	rules = sortedRules(rules)
	if len(rules) == 0 {
		return
	}
	for pi := range pools {
		p := &pools[pi]
		if p.FromSeed {
			continue
		}
		copied := false
		for di := range p.Devices {
			ts := ruleTaints(rules, p.Driver, p.Name, p.Devices[di].Name)
			if len(ts) == 0 {
				continue
			}
			if !copied {
				p.Devices = slices.Clone(p.Devices)
				copied = true
			}
			d := &p.Devices[di]
			taints := slices.Clip(d.Taints)
			for _, t := range ts {
				taints = append(taints, t.Taint)
			}
			d.Taints = taints
		}
	}
}
