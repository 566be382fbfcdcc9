package devicetainteviction

import (
	"fmt"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/pkg/allocator"
)

// The pure part: when must a pod go, given the devices its claims hold
// and the taints on them. No informer, no clock, no API call.

// DeviceUse is one device a pod's claim holds, with the tolerations the
// device was allocated with (a v1 allocation result's; a seed claim has
// none). Seed marks an instance of a seed claim: Device is its projected
// name, and it holds every leaf below it too (a whole GPU holds its
// partitions, which are the v1 devices rules select).
type DeviceUse struct {
	Claim                types.NamespacedName
	Driver, Pool, Device string
	Tolerations          []resourcev1.DeviceToleration
	Seed                 bool
}

// Taint is a taint on a device and where it comes from: a
// DeviceTaintRule (Rule set) or the device's own slice.
type Taint struct {
	resourcev1.DeviceTaint
	Rule    string
	RuleUID types.UID
}

func (t Taint) String() string {
	s := fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
	if t.Rule != "" {
		return s + " (DeviceTaintRule " + t.Rule + ")"
	}
	return s + " (ResourceSlice)"
}

// Cause is one NoExecute taint that makes a pod go: the device it is on
// and when it comes due for that device.
type Cause struct {
	Taint
	Driver, Pool, Device string
	Due                  time.Time
}

func (c Cause) String() string {
	return fmt.Sprintf("%s/%s/%s: %s", c.Driver, c.Pool, c.Device, c.Taint)
}

// Due is when a pod must be evicted (the earliest of its causes) and
// every NoExecute taint that will make it go.
type Due struct {
	At     time.Time
	Causes []Cause
}

func (d Due) String() string {
	parts := make([]string, len(d.Causes))
	for i, c := range d.Causes {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// HasRule reports whether a taint of the rule is among the causes.
func (d Due) HasRule(uid types.UID) bool {
	for _, c := range d.Causes {
		if c.Rule != "" && c.RuleUID == uid {
			return true
		}
	}
	return false
}

// TaintsOf returns the taints on the device of a use, of every effect.
type TaintsOf func(u DeviceUse) []Taint

// EvictionTime is when a pod holding uses must go, and whether it must
// at all, as Kubernetes' DeviceTaintEviction controller decides it per
// allocated device: each NoExecute taint on the device comes due at its
// timeAdded (added, for a taint that has none) plus the shortest
// tolerationSeconds among the device's matching tolerations (zero and
// negative: at once); with no matching toleration, at timeAdded; with
// matching tolerations none of which has seconds, never. The pod goes at
// the earliest due time over its devices and their taints.
func EvictionTime(uses []DeviceUse, taints TaintsOf, added time.Time) (Due, bool) {
	var d Due
	for _, u := range uses {
		for _, t := range taints(u) {
			if t.Effect != resourcev1.DeviceTaintEffectNoExecute {
				continue
			}
			due, ok := taintDue(t.DeviceTaint, u.Tolerations, added)
			if !ok {
				continue
			}
			d.Causes = append(d.Causes, Cause{Taint: t, Driver: u.Driver, Pool: u.Pool, Device: u.Device, Due: due})
			if len(d.Causes) == 1 || due.Before(d.At) {
				d.At = due
			}
		}
	}
	return d, len(d.Causes) > 0
}

// taintDue is when one NoExecute taint evicts a device allocated with
// tols, false for never.
func taintDue(t resourcev1.DeviceTaint, tols []resourcev1.DeviceToleration, added time.Time) (time.Time, bool) {
	from := added
	if t.TimeAdded != nil {
		from = t.TimeAdded.Time
	}
	var limit *int64
	matched := false
	for _, tol := range tols {
		if !allocator.ToleratesTaint(tol, t) {
			continue
		}
		matched = true
		if tol.TolerationSeconds != nil && (limit == nil || *tol.TolerationSeconds < *limit) {
			limit = tol.TolerationSeconds
		}
	}
	switch {
	case !matched:
		return from, true
	case limit == nil:
		return time.Time{}, false
	}
	return from.Add(time.Duration(max(*limit, 0)) * time.Second), true
}
