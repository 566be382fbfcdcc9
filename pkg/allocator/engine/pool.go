package engine

import (
	"fmt"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Pool is one resource pool: the devices one driver publishes under one
// pool name, at the pool's newest generation.
//
// An Incomplete or Invalid pool offers nothing: no device of it may be
// allocated, and a request for all devices on a node the pool reaches
// (ReachesNode) fails, as upstream's allocator does. Its devices are kept
// anyway so that the allocator can tell which nodes it reaches.
type Pool struct {
	Driver string
	Name   string
	// Generation is the pool generation the devices come from: the highest
	// spec.pool.generation among the pool's slices (for a projected seed
	// pool, the highest metadata.generation of its NodeResourceSlices).
	Generation int64
	// Node is set when every slice of the pool is local to this one node
	// (spec.nodeName); always for a projected seed pool.
	Node string
	// Incomplete says why not all slices of the generation are known; ""
	// when they are.
	Incomplete string
	// Invalid says why the pool's content is inconsistent (the first
	// defect found); "" when it is not.
	Invalid string
	// Devices in slice name order, then listing order.
	Devices []Device
	// Counters are the pool's shared counter sets: set name → counter name
	// → how much is available in total. Nil when the pool has none.
	Counters map[string]map[string]resource.Quantity
	// FromSeed marks a pool projected from NodeResourceSlices. Its devices
	// have SeedInstance set, and partition groups apply between them (see
	// SeedLeavesConflict); it has no counters.
	FromSeed bool
}

// Usable reports whether devices may be allocated from the pool.
func (p *Pool) Usable() bool { return p.Incomplete == "" && p.Invalid == "" }

// ReachesNode reports whether the pool matters on the node: it is local to
// it, or some device is available on it. An allocation mode All request
// on the node fails when such a pool is not Usable. Shared counters alone
// do not make a pool reach a node: upstream gathers counter slices
// wherever a device of their pool is used, but a pool whose devices are
// all for other nodes is not what an All request on this node asks for
// (the differential test against upstream pins this).
func (p *Pool) ReachesNode(node *Node) bool {
	if node == nil {
		return false
	}
	if p.Node != "" && p.Node == node.Name {
		return true
	}
	for i := range p.Devices {
		if p.Devices[i].AvailableOn(node) {
			return true
		}
	}
	return false
}

// Device is one device of a pool as an allocator needs it. The maps and
// lists are shared with the slice the device came from (or, for projected
// seed devices, built once): read them, never modify them.
type Device struct {
	// Name is unique in the pool (in a valid pool) and a DNS label.
	Name string
	// Slice is the ResourceSlice, or for a projected device the
	// NodeResourceSlice, that publishes the device.
	Slice string
	// Attributes and Capacity as in resource.k8s.io/v1; names without a
	// domain are in the driver's domain.
	Attributes map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	Capacity   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity
	// ConsumesCounters lists what allocating the device takes from the
	// pool's Counters.
	ConsumesCounters []resourcev1.DeviceCounterConsumption

	// Node selection, from the device (perDeviceNodeSelection) or else from
	// its slice. At most one is set; a device with none is available on no
	// node. NodeSelector is the selector as published (for an allocation
	// result's nodeSelector).
	NodeName     string
	NodeSelector *k8scorev1.NodeSelector
	AllNodes     bool

	Taints []resourcev1.DeviceTaint

	// AllowMultipleAllocations: the device is allocated as shares of its
	// consumable capacity (DRAConsumableCapacity), to any number of
	// claims and requests while the shares fit its capacity.
	AllowMultipleAllocations bool

	// BindingConditions and BindingFailureConditions are copied into the
	// device's allocation results (DRADeviceBindingConditions): the
	// scheduler binds the pod only once the claim's status shows every
	// binding condition True. BindsToNode: the allocation is limited to
	// the node it is made for.
	BindingConditions        []string
	BindingFailureConditions []string
	BindsToNode              bool

	// SeedInstance is the seed instance ID of a projected device ("" for a
	// published v1 device): the leaf whose partition locks it takes.
	SeedInstance string

	// Matcher is NodeSelector compiled by the front end that built the
	// device; a device with a NodeSelector but no Matcher is available
	// on no node.
	Matcher NodeMatcher
}

// NodeMatcher is a node selector compiled by a front end (allot's
// corev1.NodeSelector is one).
type NodeMatcher interface {
	Matches(nodeName string, labels map[string]string) bool
}

// Node is what the engine knows of a node: its name and labels.
type Node struct {
	Name   string
	Labels map[string]string
}

// AvailableOn reports whether the device can be used on the node, by its
// node name, node selector (allot's matcher: label expressions and the
// field metadata.name) or all-nodes flag.
func (d *Device) AvailableOn(node *Node) bool {
	switch {
	case d.AllNodes:
		return true
	case node == nil:
		return false
	case d.NodeName != "":
		return d.NodeName == node.Name
	case d.NodeSelector != nil:
		return d.Matcher != nil && d.Matcher.Matches(node.Name, node.Labels)
	}
	return false
}

// InventoryProblem is something in the published slices that the inventory
// could not take as it is: a device or attribute left out, or a slice
// ignored. Pool-wide states are in Pool.Incomplete and Pool.Invalid
// instead.
type InventoryProblem struct {
	Driver string
	Pool   string
	Slice  string // "" when not tied to one slice
	// Device is the v1 device name when it is known and valid.
	Device string
	// Instance is the seed instance ID (projections only).
	Instance string
	// Field is the attribute or capacity name, or the field, concerned.
	Field  string
	Reason string
}

func (p InventoryProblem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "driver %s pool %s", p.Driver, p.Pool)
	if p.Slice != "" {
		fmt.Fprintf(&b, " slice %s", p.Slice)
	}
	if p.Instance != "" {
		fmt.Fprintf(&b, " instance %s", p.Instance)
	}
	if p.Device != "" {
		fmt.Fprintf(&b, " device %s", p.Device)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, " %s", p.Field)
	}
	return b.String() + ": " + p.Reason
}

// SeedLeavesConflict reports whether two seed leaves of one node and driver
// cannot be allocated at the same time: they are the same leaf, or one
// instance on both their paths is split by different partition groups.
// This is the "one partition group of a parent at a time" rule in terms of
// instance IDs, for projected devices (Device.SeedInstance); v1 can only
// express it with compatibilityGroups, which are off by default.
func SeedLeavesConflict(a, b string) bool {
	// IDs alternate instance and group names: inst/group/inst/group/leaf.
	for seg := 0; ; seg++ {
		ia, ib := strings.IndexByte(a, '/'), strings.IndexByte(b, '/')
		na, nb := a, b
		if ia >= 0 {
			na = a[:ia]
		}
		if ib >= 0 {
			nb = b[:ib]
		}
		if na != nb {
			// Different instances (siblings in one group, or roots) are
			// independent; different groups of one instance exclude each
			// other.
			return seg%2 == 1
		}
		if ia < 0 || ib < 0 {
			// One is a prefix of the other: the same leaf (a leaf has no
			// partitions, so it cannot be the ancestor of another).
			return true
		}
		a, b = a[ia+1:], b[ib+1:]
	}
}
