package allocator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/celenv"
	"allot.dev/allot/pkg/allocator/engine"
	"allot.dev/allot/pkg/devicemaps"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file is the device inventory of resource.k8s.io/v1 (docs/design/
// resource-v1.md §3): published ResourceSlices grouped into pools by
// upstream's rules (V1Pools), and allot's seed NodeResourceSlices projected
// into the same shape (SeedDevices), so that one allocator and one
// allocation state (keyed by driver, pool and device name) serve both APIs.
// It is plain data built by pure functions; nothing here is wired into
// Allocate yet.

// V1Pools groups ResourceSlices into pools by upstream's rules (k8s.io/api
// resource/v1 ResourcePool and Device comments; k8s.io/dynamic-resource-
// allocation structured GatherPools and buildPool):
//
//   - a pool is (spec.driver, spec.pool.name); only slices of its highest
//     spec.pool.generation count;
//   - it is Incomplete unless the number of those slices equals their
//     resourceSliceCount. Slices whose devices use compatibilityGroups are
//     ignored while DRADeviceCompatibilityGroups is off (off by default),
//     which leaves their pool Incomplete, as upstream does;
//   - it is Invalid when a device name repeats across its slices, a counter
//     set name repeats, a device consumes from a counter set the pool lacks
//     or a counter its set lacks, or a slice has both devices and shared
//     counters;
//   - node selection comes from the slice (nodeName, nodeSelector,
//     allNodes) or, with perDeviceNodeSelection, from each device.
//
// Pools are sorted by driver and name. nil slices are skipped. The result
// shares maps and lists with the input slices, which must not be modified
// afterwards.
func V1Pools(in []*resourcev1.ResourceSlice) ([]engine.Pool, []engine.InventoryProblem) {
	type poolKey struct{ driver, name string }
	byPool := make(map[poolKey][]*resourcev1.ResourceSlice)
	var keys []poolKey
	for _, s := range in {
		if s == nil {
			continue
		}
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		have, seen := byPool[k]
		switch {
		case !seen:
			keys = append(keys, k)
			byPool[k] = []*resourcev1.ResourceSlice{s}
		case s.Spec.Pool.Generation > have[0].Spec.Pool.Generation:
			byPool[k] = append(have[:0:0], s)
		case s.Spec.Pool.Generation == have[0].Spec.Pool.Generation:
			byPool[k] = append(have, s)
		}
	}
	slices.SortFunc(keys, func(a, b poolKey) int {
		return cmp.Or(strings.Compare(a.driver, b.driver), strings.Compare(a.name, b.name))
	})
	pools := make([]engine.Pool, 0, len(keys))
	var problems []engine.InventoryProblem
	for _, k := range keys {
		ss := byPool[k]
		slices.SortFunc(ss, func(a, b *resourcev1.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
		var p engine.Pool
		p, problems = invBuildPool(k.driver, k.name, ss, problems)
		pools = append(pools, p)
	}
	return pools, problems
}

// invBuildPool builds one pool from its slices of the newest generation,
// sorted by name.
func invBuildPool(driver, name string, ss []*resourcev1.ResourceSlice, problems []engine.InventoryProblem) (engine.Pool, []engine.InventoryProblem) {
	p := engine.Pool{Driver: driver, Name: name, Generation: ss[0].Spec.Pool.Generation, Node: invSliceNode(ss[0])}
	want := ss[0].Spec.Pool.ResourceSliceCount
	counted, nDevices := 0, 0
	var ignored []string
	for _, s := range ss {
		if p.Node != "" && invSliceNode(s) != p.Node {
			p.Node = ""
		}
		if s.Spec.Pool.ResourceSliceCount != want && p.Incomplete == "" {
			p.Incomplete = fmt.Sprintf("slices %s and %s of generation %d disagree on resourceSliceCount (%d, %d)",
				ss[0].Name, s.Name, p.Generation, want, s.Spec.Pool.ResourceSliceCount)
		}
		if invUsesCompatibilityGroups(s) {
			ignored = append(ignored, s.Name)
			continue
		}
		counted++
		nDevices += len(s.Spec.Devices)
	}
	switch {
	case p.Incomplete != "":
	case len(ignored) > 0:
		p.Incomplete = fmt.Sprintf("slices %s use compatibilityGroups, which this allocator does not support (feature DRADeviceCompatibilityGroups); they are ignored",
			strings.Join(ignored, ", "))
	case int64(counted) != want:
		p.Incomplete = fmt.Sprintf("%d of %d slices of generation %d are published", counted, want, p.Generation)
	}

	p.Devices = make([]engine.Device, 0, nDevices)
	names := make(map[string]struct{}, nDevices)
	for _, s := range ss {
		if invUsesCompatibilityGroups(s) {
			continue
		}
		if len(s.Spec.Devices) > 0 && len(s.Spec.SharedCounters) > 0 && p.Invalid == "" {
			p.Invalid = fmt.Sprintf("slice %s has both devices and sharedCounters", s.Name)
		}
		for _, cs := range s.Spec.SharedCounters {
			if _, dup := p.Counters[cs.Name]; dup {
				if p.Invalid == "" {
					p.Invalid = fmt.Sprintf("duplicate counter set name %s", cs.Name)
				}
				continue
			}
			if p.Counters == nil {
				p.Counters = make(map[string]map[string]resource.Quantity, len(s.Spec.SharedCounters))
			}
			set := make(map[string]resource.Quantity, len(cs.Counters))
			for n, c := range cs.Counters {
				set[n] = c.Value
			}
			p.Counters[cs.Name] = set
		}
		if len(s.Spec.Devices) == 0 {
			continue
		}
		sliceSel := invNodeSelection{}
		perDevice := false
		switch {
		case s.Spec.NodeName != nil && *s.Spec.NodeName != "":
			sliceSel.name = *s.Spec.NodeName
		case s.Spec.NodeSelector != nil:
			sliceSel.sel = s.Spec.NodeSelector
			sliceSel.conv, problems = invConvertNodeSelectorReporting(s.Spec.NodeSelector, problems, engine.InventoryProblem{
				Driver: driver, Pool: name, Slice: s.Name, Field: "spec.nodeSelector"})
		case s.Spec.AllNodes != nil && *s.Spec.AllNodes:
			sliceSel.all = true
		case s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection:
			perDevice = true
		default:
			problems = append(problems, engine.InventoryProblem{Driver: driver, Pool: name, Slice: s.Name,
				Reason: "sets none of nodeName, nodeSelector, allNodes and perDeviceNodeSelection; its devices are available on no node"})
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if _, dup := names[d.Name]; dup && p.Invalid == "" {
				p.Invalid = fmt.Sprintf("duplicate device name %s", d.Name)
			}
			names[d.Name] = struct{}{}
			sel := sliceSel
			if perDevice {
				sel = invNodeSelection{}
				switch {
				case d.NodeName != nil && *d.NodeName != "":
					sel.name = *d.NodeName
				case d.NodeSelector != nil:
					sel.sel = d.NodeSelector
					sel.conv, problems = invConvertNodeSelectorReporting(d.NodeSelector, problems, engine.InventoryProblem{
						Driver: driver, Pool: name, Slice: s.Name, Device: d.Name, Field: "nodeSelector"})
				case d.AllNodes != nil && *d.AllNodes:
					sel.all = true
				default:
					problems = append(problems, engine.InventoryProblem{Driver: driver, Pool: name, Slice: s.Name, Device: d.Name,
						Reason: "the slice has perDeviceNodeSelection, but the device sets none of nodeName, nodeSelector and allNodes; it is available on no node"})
				}
			}
			p.Devices = append(p.Devices, engine.Device{
				Name: d.Name, Slice: s.Name,
				Attributes: d.Attributes, Capacity: d.Capacity, ConsumesCounters: d.ConsumesCounters,
				NodeName: sel.name, NodeSelector: sel.sel, AllNodes: sel.all, Matcher: matcherOf(sel.conv),
				Taints: d.Taints, AllowMultipleAllocations: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations,
				BindingConditions: d.BindingConditions, BindingFailureConditions: d.BindingFailureConditions,
				BindsToNode: d.BindsToNode != nil && *d.BindsToNode,
			})
		}
	}
	if p.Invalid == "" {
		p.Invalid = invCheckCounters(p.Counters, p.Devices)
	}
	return p, problems
}

// invSliceNode is the slice's spec.nodeName, or "".
func invSliceNode(s *resourcev1.ResourceSlice) string {
	if s.Spec.NodeName == nil {
		return ""
	}
	return *s.Spec.NodeName
}

type invNodeSelection struct {
	name string
	sel  *k8scorev1.NodeSelector
	conv *corev1.NodeSelector
	all  bool
}

// invCheckCounters returns why some device consumes from a counter
// set or a counter that the pool does not define, or "".
func invCheckCounters(sets map[string]map[string]resource.Quantity, devices []engine.Device) string {
	for i := range devices {
		for _, c := range devices[i].ConsumesCounters {
			set, found := sets[c.CounterSet]
			if !found {
				return fmt.Sprintf("device %s: counter set %s not found", devices[i].Name, c.CounterSet)
			}
			for n := range c.Counters {
				if _, found := set[n]; !found {
					return fmt.Sprintf("device %s: counter %s not found in counter set %s", devices[i].Name, n, c.CounterSet)
				}
			}
		}
	}
	return ""
}

func invUsesCompatibilityGroups(s *resourcev1.ResourceSlice) bool {
	for i := range s.Spec.Devices {
		for _, c := range s.Spec.Devices[i].ConsumesCounters {
			if len(c.CompatibilityGroups) > 0 {
				return true
			}
		}
	}
	return false
}

// invConvertNodeSelector converts a Kubernetes node selector into allot's
// type, whose Matches implements the same semantics (terms ORed,
// requirements ANDed, a term without requirements matches nothing). A
// field requirement on anything but metadata.name, which upstream cannot
// parse, makes allot's Matches refuse the term; bad lists their keys.
func invConvertNodeSelector(s *k8scorev1.NodeSelector) (out *corev1.NodeSelector, bad []string) {
	if s == nil {
		return nil, nil
	}
	out = resourceconv.NodeSelectorFromKube(s)
	for _, t := range s.NodeSelectorTerms {
		for _, r := range t.MatchFields {
			if r.Key != "metadata.name" {
				bad = append(bad, r.Key)
			}
		}
	}
	return out, bad
}

func invConvertNodeSelectorReporting(s *k8scorev1.NodeSelector, problems []engine.InventoryProblem, at engine.InventoryProblem) (*corev1.NodeSelector, []engine.InventoryProblem) {
	out, bad := invConvertNodeSelector(s)
	for _, key := range bad {
		at.Reason = fmt.Sprintf("matchFields key %q is not supported (only metadata.name); the term matches no node", key)
		problems = append(problems, at)
	}
	return out, problems
}

// SeedDeviceName is the resource.k8s.io/v1 name of a seed leaf: its
// instance ID with every "/" written "--" ("gpu0/mig/a" → "gpu0--mig--a").
// It is a valid device name only when it is a DNS label, and usable only
// when no other leaf of the node and driver has the same one.
func SeedDeviceName(instanceID string) string {
	return strings.ReplaceAll(instanceID, "/", "--")
}

// invValueMaxLength is v1's bound on string and version attribute values
// (DeviceAttributeMaxValueLength).
const invValueMaxLength = resourcev1.DeviceAttributeMaxValueLength

// SeedDevices projects seed NodeResourceSlices into v1 pools, one per node
// and driver (docs/design/resource-v1.md §3):
//
//   - driver = spec.driverName, pool name and Node = spec.nodeName,
//     generation = the highest metadata.generation of those slices;
//   - each healthy, well-formed leaf (as NewModel sees it) is a device named
//     SeedDeviceName(instance ID). A name that is not a DNS label, or that
//     several leaves share, is a problem and those leaves are left out:
//     allocation state is keyed by device name, so a shared name could hand
//     one device out twice;
//   - the leaf's effective attributes (NewModel's: common groups, partition
//     groups, then the instance's own) become v1 attributes: quantity →
//     Capacity, bool/int/string → BoolValue/IntValue/StringValue, version →
//     VersionValue in canonical semver. Lists (intSlice, stringSlice) have
//     no v1 form while DRAListTypeAttributes is off, names that are not C
//     identifiers of at most 32 characters are not v1 names, and strings
//     and versions longer than 64 characters are not v1 values: each is a
//     problem and left out, the device is still offered. A device that
//     would still have more than 32 attributes and capacities is left out
//     (which ones to drop would be arbitrary);
//   - unhealthy and defective leaves are left out (v1 has no health field);
//     NewModel's problems are passed on;
//   - the taints DeviceTaintRules put on a leaf (NewModelTainted) are the
//     device's taints;
//   - partition groups are not expressed as counters: devices carry
//     SeedInstance, and SeedLeavesConflict (or the seed Model's own locks)
//     keeps one partition group of an instance at a time.
//
// Pools are sorted by driver, then node. nil slices are skipped.
func SeedDevices(in []*resourceapi.NodeResourceSlice) (pools []engine.Pool, problems []engine.InventoryProblem) {
	return seedDevices(in, nil)
}

// seedDevices is SeedDevices with the nodes' Models from model (nil:
// compiled here); see NewInventoryModels.
func seedDevices(in []*resourceapi.NodeResourceSlice, model func(node string, slices []*resourceapi.NodeResourceSlice) *Model) (pools []engine.Pool, problems []engine.InventoryProblem) {
	if model == nil {
		model = NewModel
	}
	byNode := map[string][]*resourceapi.NodeResourceSlice{}
	for _, s := range in {
		if s != nil {
			byNode[s.Spec.NodeName] = append(byNode[s.Spec.NodeName], s)
		}
	}
	for node, ss := range byNode {
		ps, pr := model(node, ss).seedPools(node, ss)
		pools = append(pools, ps...)
		problems = append(problems, pr...)
	}
	slices.SortFunc(pools, func(a, b engine.Pool) int {
		return cmp.Or(strings.Compare(a.Driver, b.Driver), strings.Compare(a.Name, b.Name))
	})
	slices.SortStableFunc(problems, func(a, b engine.InventoryProblem) int {
		return cmp.Or(strings.Compare(a.Driver, b.Driver), strings.Compare(a.Pool, b.Pool))
	})
	return pools, problems
}

// seedProjection is a Model's v1 pools and problems.
type seedProjection struct {
	pools    []engine.Pool
	problems []engine.InventoryProblem
}

// seedPools is seedNodePools of the slices m was compiled from, computed
// once per Model: an inventory rebuilt over the same Models (another
// node's slices changed, a simulation added a node) projects only the
// new ones. The pools' devices are shared; inventories read them only.
func (m *Model) seedPools(node string, ss []*resourceapi.NodeResourceSlice) ([]engine.Pool, []engine.InventoryProblem) {
	if p := m.v1.Load(); p != nil {
		return slices.Clone(p.pools), p.problems
	}
	pools, problems := seedNodePools(node, ss, m)
	m.v1.CompareAndSwap(nil, &seedProjection{pools: pools, problems: problems})
	return slices.Clone(pools), problems
}

// seedNodePools projects the slices of one node, compiled into m.
func seedNodePools(node string, ss []*resourceapi.NodeResourceSlice, m *Model) (pools []engine.Pool, problems []engine.InventoryProblem) {
	for _, pr := range m.Problems() {
		problems = append(problems, engine.InventoryProblem{Driver: pr.Driver, Pool: node, Slice: pr.Slice, Instance: pr.Path,
			Reason: pr.Message})
	}
	gens := map[string]int64{}
	// The slice of each root instance: NewModel reads slices in name order
	// and the first root of a name wins.
	rootSlice := map[string]map[string]string{}
	sorted := slices.Clone(ss)
	slicesSortByName(sorted)
	for _, s := range sorted {
		d := s.Spec.DriverName
		if g, seen := gens[d]; !seen || s.Generation > g {
			gens[d] = s.Generation
		}
		if s.Spec.Partitionable == nil {
			continue
		}
		if rootSlice[d] == nil {
			rootSlice[d] = map[string]string{}
		}
		for _, ri := range s.Spec.Partitionable.ResourceInstances {
			if _, seen := rootSlice[d][ri.Name]; !seen {
				rootSlice[d][ri.Name] = s.Name
			}
		}
	}
	drivers := make([]string, 0, len(gens))
	for d := range gens {
		drivers = append(drivers, d)
	}
	slices.Sort(drivers)
	for _, driver := range drivers {
		p := engine.Pool{Driver: driver, Name: node, Generation: gens[driver], Node: node, FromSeed: true}
		dm := m.drivers[driver]
		if dm == nil {
			pools = append(pools, p)
			continue
		}
		at := func(in *instNode) engine.InventoryProblem {
			return engine.InventoryProblem{Driver: driver, Pool: node, Instance: in.id, Slice: rootSlice[driver][dm.insts[in.root].id]}
		}
		// Every leaf takes part in the name checks, usable or not: an
		// unhealthy leaf keeps its name and its allocations.
		owners := make(map[string][]int32, len(dm.leaves))
		for _, l := range dm.leaves {
			name := SeedDeviceName(dm.insts[l].id)
			owners[name] = append(owners[name], l)
		}
		p.Devices = make([]engine.Device, 0, len(dm.leaves))
		for _, l := range dm.leaves {
			in := &dm.insts[l]
			name := SeedDeviceName(in.id)
			if errs := utilvalidation.IsDNS1123Label(name); len(errs) > 0 {
				pr := at(in)
				pr.Reason = fmt.Sprintf("device name %q is not a DNS label (%s); left out", name, strings.Join(errs, "; "))
				problems = append(problems, pr)
				continue
			}
			if o := owners[name]; len(o) > 1 {
				var others []string
				for _, x := range o {
					if x != l {
						others = append(others, dm.insts[x].id)
					}
				}
				pr := at(in)
				pr.Reason = fmt.Sprintf("device name %q is also the name of instance %s; left out", name, strings.Join(others, ", "))
				problems = append(problems, pr)
				continue
			}
			if !in.ok && !in.tainted {
				continue
			}
			d := engine.Device{Name: name, Slice: rootSlice[driver][dm.insts[in.root].id], NodeName: node, SeedInstance: in.id}
			for _, t := range in.taints {
				d.Taints = append(d.Taints, t.Taint)
			}
			var attrProblems []engine.InventoryProblem
			d.Attributes, d.Capacity, attrProblems = seedV1Attributes(in.vars, at(in))
			d.Attributes, d.Capacity = v1SharedMaps.Attributes(d.Attributes), v1SharedMaps.Capacities(d.Capacity)
			for i := range attrProblems {
				attrProblems[i].Device = name
			}
			problems = append(problems, attrProblems...)
			if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
				pr := at(in)
				pr.Device = name
				pr.Reason = fmt.Sprintf("has %d attributes and capacities, v1 allows %d; left out", n, resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
				problems = append(problems, pr)
				continue
			}
			p.Devices = append(p.Devices, d)
		}
		pools = append(pools, p)
	}
	return pools, problems
}

// v1SharedMaps shares one attribute map and one capacity map among the
// projected seed devices whose attributes (capacities) are equal, on every
// node, and with the v1 devices of the ResourceSlice informers
// (devicemaps.Shared; a test may swap in its own).
var v1SharedMaps = devicemaps.Shared

// seedV1Attributes converts a leaf's effective attributes, as the seed
// selectors see them, into v1 attributes and capacities. at is the problem
// template for what is left out.
func seedV1Attributes(v *attrVars, at engine.InventoryProblem) (attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute,
	caps map[resourcev1.QualifiedName]resourcev1.DeviceCapacity, problems []engine.InventoryProblem) {
	report := func(name, reason string) {
		pr := at
		pr.Field, pr.Reason = name, reason
		problems = append(problems, pr)
	}
	// Names in order, so that problems come out in a fixed order.
	var names []string
	each := func(m ref.Val, f func(name string, val ref.Val)) {
		mapper, ok := m.(traits.Mapper)
		if !ok {
			return
		}
		names = names[:0]
		for it := mapper.Iterator(); it.HasNext() == types.True; {
			if k, ok := it.Next().(types.String); ok {
				names = append(names, string(k))
			}
		}
		slices.Sort(names)
		for _, n := range names {
			val, _ := mapper.Find(types.String(n))
			if msg := invAttributeNameProblem(n); msg != "" {
				report(n, msg+"; left out")
				continue
			}
			f(n, val)
		}
	}
	setAttr := func(n string, a resourcev1.DeviceAttribute) {
		if attrs == nil {
			attrs = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
		}
		attrs[resourcev1.QualifiedName(n)] = a
	}
	each(v.quantities, func(n string, val ref.Val) {
		if q, ok := celenv.QuantityValue(val); ok {
			if caps == nil {
				caps = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
			}
			caps[resourcev1.QualifiedName(n)] = resourcev1.DeviceCapacity{Value: q.DeepCopy()}
		}
	})
	each(v.bools, func(n string, val ref.Val) {
		if b, ok := val.(types.Bool); ok {
			x := bool(b)
			setAttr(n, resourcev1.DeviceAttribute{BoolValue: &x})
		}
	})
	each(v.ints, func(n string, val ref.Val) {
		if i, ok := val.(types.Int); ok {
			x := int64(i)
			setAttr(n, resourcev1.DeviceAttribute{IntValue: &x})
		}
	})
	each(v.strings, func(n string, val ref.Val) {
		if s, ok := val.(types.String); ok {
			x := string(s)
			if len(x) > invValueMaxLength {
				report(n, fmt.Sprintf("string of %d bytes, v1 allows %d; left out", len(x), invValueMaxLength))
				return
			}
			setAttr(n, resourcev1.DeviceAttribute{StringValue: &x})
		}
	})
	each(v.versions, func(n string, val ref.Val) {
		if v, ok := celenv.SemverValue(val); ok {
			x := v.String()
			if len(x) > invValueMaxLength {
				report(n, fmt.Sprintf("version of %d bytes, v1 allows %d; left out", len(x), invValueMaxLength))
				return
			}
			setAttr(n, resourcev1.DeviceAttribute{VersionValue: &x})
		}
	})
	listReason := "list attributes need DRAListTypeAttributes, which is off; left out"
	each(v.intslices, func(n string, _ ref.Val) { report(n, "intSlice: "+listReason) })
	each(v.stringslices, func(n string, _ ref.Val) { report(n, "stringSlice: "+listReason) })
	return attrs, caps, problems
}

// invAttributeNameProblem returns why name is not a v1 attribute or capacity
// name (QualifiedName: a C identifier of at most 32 characters, optionally
// after a DNS subdomain of at most 63 characters and "/"), or "".
func invAttributeNameProblem(name string) string {
	id := name
	if i := strings.IndexByte(name, '/'); i >= 0 {
		domain := name[:i]
		id = name[i+1:]
		if errs := utilvalidation.IsDNS1123Subdomain(domain); len(errs) > 0 || len(domain) > resourcev1.DeviceMaxDomainLength {
			return fmt.Sprintf("not a v1 attribute name: domain %q must be a DNS subdomain of at most %d characters", domain, resourcev1.DeviceMaxDomainLength)
		}
	}
	if len(content.IsCIdentifier(id)) > 0 || len(id) > resourcev1.DeviceMaxIDLength {
		return fmt.Sprintf("not a v1 attribute name: must be a C identifier of at most %d characters", resourcev1.DeviceMaxIDLength)
	}
	return ""
}

// ValidateSeedDeviceNames checks the v1 device names of a NodeResourceSlice's
// leaves (SeedDeviceName): each must be a DNS label, and no two leaves of
// the slice may share one. Errors are at the leaf's name field. Names that
// ValidateNodeResourceSlice already refuses (empty, containing "/") and
// repeated instance IDs are left to it. Leaves in other slices of the same
// node and driver are not seen; SeedDevices reports collisions across
// slices.
func ValidateSeedDeviceNames(s *resourceapi.NodeResourceSlice) field.ErrorList {
	if s == nil || s.Spec.Partitionable == nil {
		return nil
	}
	v := seedNameValidator{byName: map[string]string{}, seen: map[string]bool{}}
	v.instances(s.Spec.Partitionable.ResourceInstances, "", field.NewPath("spec", "partitionable", "resourceInstances"), 0)
	return v.errs
}

type seedNameValidator struct {
	byName map[string]string // device name → instance ID
	seen   map[string]bool   // instance and group IDs
	errs   field.ErrorList
}

func (v *seedNameValidator) instances(list []resourceapi.ResourceInstance, prefix string, path *field.Path, depth int) {
	for i := range list {
		ri, p := &list[i], path.Index(i)
		if checkName(ri.Name) != "" || depth >= maxDepth {
			continue
		}
		id := prefix + ri.Name
		if v.seen[id] {
			continue
		}
		v.seen[id] = true
		if len(ri.Partitions) > 0 {
			for gi := range ri.Partitions {
				g := &ri.Partitions[gi]
				gid := id + "/" + g.Name
				if checkName(g.Name) != "" || v.seen[gid] {
					continue
				}
				v.seen[gid] = true
				v.instances(g.ResourceInstances, gid+"/", p.Child("partitions").Index(gi).Child("resourceInstances"), depth+1)
			}
			continue
		}
		name := SeedDeviceName(id)
		np := p.Child("name")
		if errs := utilvalidation.IsDNS1123Label(name); len(errs) > 0 {
			v.errs = append(v.errs, field.Invalid(np, ri.Name, fmt.Sprintf(
				"the leaf's resource.k8s.io/v1 device name %q (its instance ID %q with \"/\" written \"--\") must be a DNS label: %s",
				name, id, strings.Join(errs, "; "))))
			continue
		}
		if other, dup := v.byName[name]; dup {
			e := field.Duplicate(np, ri.Name)
			e.Detail = fmt.Sprintf("the leaf's resource.k8s.io/v1 device name %q (its instance ID %q with \"/\" written \"--\") is also that of instance %q",
				name, id, other)
			v.errs = append(v.errs, e)
			continue
		}
		v.byName[name] = id
	}
}

// matcherOf is a converted node selector as a device's Matcher (nil
// when there is none).
func matcherOf(sel *corev1.NodeSelector) engine.NodeMatcher {
	if sel == nil {
		return nil
	}
	return sel
}

// engineNode is node as the engine sees it, in into; nil for no node.
func engineNode(node *corev1.Node, into *engine.Node) *engine.Node {
	if node == nil {
		return nil
	}
	*into = engine.Node{Name: node.Name, Labels: node.Labels}
	return into
}

// NodeOf is node as the engine sees it; nil for no node.
func NodeOf(node *corev1.Node) *engine.Node {
	var n engine.Node
	return engineNode(node, &n)
}

// DeviceAvailableOn reports whether the device can be used on the node
// (Device.AvailableOn); a device built by hand, without a Matcher,
// has its NodeSelector compiled here.
func DeviceAvailableOn(d *engine.Device, node *corev1.Node) bool {
	if d.NodeSelector != nil && d.Matcher == nil {
		sel, _ := invConvertNodeSelector(d.NodeSelector)
		c := *d
		c.Matcher = matcherOf(sel)
		d = &c
	}
	var en engine.Node
	return d.AvailableOn(engineNode(node, &en))
}

// sortedKeys returns m's keys in order, in a slice of their number
// (slices.Sorted(maps.Keys(m)) grows its slice as it goes, which the
// seed projection's per-device maps paid for).
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
