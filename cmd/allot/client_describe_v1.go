package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Describers of resource.k8s.io/v1: ResourceClaim, ResourceSlice and
// DeviceClass.

// describeClaimV1 describes a resource.k8s.io/v1 claim: what it asks for,
// its state, the devices it got and who uses them.
func describeClaimV1(w *describeWriter, u *unstructured.Unstructured) error {
	var claim resourcev1.ResourceClaim
	if err := fromUnstructured(u, &claim); err != nil {
		return err
	}
	spec, st := claim.Spec.Devices, claim.Status
	describeDeviceRequests(w, spec.Requests)
	describeDeviceConstraints(w, spec.Constraints)
	describeClaimConfig(w, spec.Config)
	w.line(0, "State:\t%s", claimV1State(&claim))
	describeAllocationV1(w, st.Allocation)
	if len(st.ReservedFor) == 0 {
		w.line(0, "Reserved For:\t<none>")
	} else {
		w.line(0, "Reserved For:")
		w.line(1, "Resource\tName\tUID")
		w.line(1, "--------\t----\t---")
		for _, r := range st.ReservedFor {
			w.line(1, "%s\t%s\t%s", qualify(r.Resource, r.APIGroup), r.Name, r.UID)
		}
	}
	describeDeviceStatuses(w, st.Devices)
	return nil
}

// claimV1State is the claim's state as `allot get` prints it: deleted,
// pending or allocated, and reserved.
func claimV1State(c *resourcev1.ResourceClaim) string {
	var state []string
	if c.DeletionTimestamp != nil {
		state = append(state, "deleted")
	}
	if c.Status.Allocation == nil {
		state = append(state, "pending")
	} else {
		state = append(state, "allocated")
	}
	if len(c.Status.ReservedFor) > 0 {
		state = append(state, "reserved")
	}
	return strings.Join(state, ",")
}

func describeDeviceRequests(w *describeWriter, reqs []resourcev1.DeviceRequest) {
	if len(reqs) == 0 {
		w.line(0, "Requests:\t<none>")
		return
	}
	w.line(0, "Requests:")
	for _, r := range reqs {
		w.line(1, "%s:", r.Name)
		if e := r.Exactly; e != nil {
			describeExactRequest(w, 2, e.DeviceClassName, e.AllocationMode, e.Count, e.Selectors,
				e.Tolerations, e.Capacity)
			if e.AdminAccess != nil && *e.AdminAccess {
				w.line(2, "Admin Access:\ttrue")
			}
		}
		if len(r.FirstAvailable) > 0 {
			w.line(2, "First Available:")
			for _, s := range r.FirstAvailable {
				w.line(3, "%s:", s.Name)
				describeExactRequest(w, 4, s.DeviceClassName, s.AllocationMode, s.Count, s.Selectors,
					s.Tolerations, s.Capacity)
			}
		}
	}
}

// describeExactRequest prints the fields an exactly request and a
// firstAvailable alternative share.
func describeExactRequest(w *describeWriter, level int, class string, mode resourcev1.DeviceAllocationMode, count int64,
	sels []resourcev1.DeviceSelector, tols []resourcev1.DeviceToleration, capReq *resourcev1.CapacityRequirements) {
	w.line(level, "Device Class:\t%s", orNone(class))
	w.line(level, "Allocation:\t%s", allocationModeText(mode, count))
	describeSelectors(w, level, sels)
	if len(tols) > 0 {
		var ts []string
		for _, t := range tols {
			ts = append(ts, deviceTolerationText(t))
		}
		w.line(level, "Tolerations:\t%s", strings.Join(ts, ", "))
	}
	if capReq != nil && len(capReq.Requests) > 0 {
		w.line(level, "Capacity:\t%s", quantitiesText(capReq.Requests))
	}
}

// allocationModeText is "ExactCount 2" or "All"; the default mode is
// ExactCount and the default count 1.
func allocationModeText(mode resourcev1.DeviceAllocationMode, count int64) string {
	if mode == resourcev1.DeviceAllocationModeAll {
		return string(mode)
	}
	if count == 0 {
		count = 1
	}
	return fmt.Sprintf("%s %d", resourcev1.DeviceAllocationModeExactCount, count)
}

func describeSelectors(w *describeWriter, level int, sels []resourcev1.DeviceSelector) {
	if len(sels) == 0 {
		w.line(level, "Selectors:\t<none>")
		return
	}
	w.line(level, "Selectors:")
	for _, s := range sels {
		if s.CEL != nil {
			w.line(level+1, "- cel:\t%s", oneLine(s.CEL.Expression))
		} else {
			w.line(level+1, "- <empty>")
		}
	}
}

// oneLine folds a multi-line CEL expression onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func deviceTolerationText(t resourcev1.DeviceToleration) string {
	op := t.Operator
	if op == "" {
		op = resourcev1.DeviceTolerationOpEqual
	}
	s := fmt.Sprintf("%s %s %s:%s", t.Key, op, t.Value, t.Effect)
	if t.TolerationSeconds != nil {
		s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
	}
	return s
}

func describeDeviceConstraints(w *describeWriter, cs []resourcev1.DeviceConstraint) {
	if len(cs) == 0 {
		w.line(0, "Constraints:\t<none>")
		return
	}
	w.line(0, "Constraints:")
	for _, c := range cs {
		reqs := "all requests"
		if len(c.Requests) > 0 {
			reqs = strings.Join(c.Requests, ", ")
		}
		switch {
		case c.MatchAttribute != nil:
			w.line(1, "- match attribute %s\tamong %s", *c.MatchAttribute, reqs)
		case c.DistinctAttribute != nil:
			w.line(1, "- distinct attribute %s\tamong %s", *c.DistinctAttribute, reqs)
		default:
			w.line(1, "- <empty>\tamong %s", reqs)
		}
	}
}

func describeClaimConfig(w *describeWriter, cfg []resourcev1.DeviceClaimConfiguration) {
	if len(cfg) == 0 {
		w.line(0, "Config:\t<none>")
		return
	}
	w.line(0, "Config:")
	for _, c := range cfg {
		describeDeviceConfig(w, 1, "", c.Requests, c.DeviceConfiguration)
	}
}

// describeDeviceConfig prints one configuration entry as a list item.
func describeDeviceConfig(w *describeWriter, level int, source string, reqs []string, dc resourcev1.DeviceConfiguration) {
	first := "- "
	item := func(format string, args ...any) {
		w.line(level, first+format, args...)
		first = "  "
	}
	if source != "" {
		item("Source:\t%s", source)
	}
	if len(reqs) > 0 {
		item("Requests:\t%s", strings.Join(reqs, ", "))
	} else {
		item("Requests:\tall")
	}
	if o := dc.Opaque; o != nil {
		item("Driver:\t%s", o.Driver)
		item("Parameters:\t%s", rawText(o.Parameters))
	} else {
		item("Driver:\t<none>")
	}
}

// rawText is embedded JSON on one line.
func rawText(r runtime.RawExtension) string {
	if len(r.Raw) == 0 {
		return "<none>"
	}
	return oneLine(string(r.Raw))
}

func describeAllocationV1(w *describeWriter, a *resourcev1.AllocationResult) {
	if a == nil {
		w.line(0, "Allocation:\t<none>")
		return
	}
	w.line(0, "Allocation:")
	if a.AllocationTimestamp != nil {
		w.line(1, "Allocated At:\t%s (%s ago)", a.AllocationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), since(*a.AllocationTimestamp))
	}
	w.line(1, "Node Selector:\t%s", nodeSelectorText(a.NodeSelector))
	if len(a.Devices.Results) == 0 {
		w.line(1, "Devices:\t<none>")
	} else {
		w.line(1, "Devices:")
		w.line(2, "Request\tDriver\tPool\tDevice\tAdmin Access")
		w.line(2, "-------\t------\t----\t------\t------------")
		for _, r := range a.Devices.Results {
			admin := "false"
			if r.AdminAccess != nil && *r.AdminAccess {
				admin = "true"
			}
			dev := r.Device
			if r.ShareID != nil {
				dev += " (share " + string(*r.ShareID)
				for _, n := range slices.Sorted(maps.Keys(r.ConsumedCapacity)) {
					q := r.ConsumedCapacity[n]
					dev += ", " + string(n) + " " + q.String()
				}
				dev += ")"
			}
			w.line(2, "%s\t%s\t%s\t%s\t%s", r.Request, r.Driver, r.Pool, dev, admin)
		}
	}
	if len(a.Devices.Config) > 0 {
		w.line(1, "Config:")
		for _, c := range a.Devices.Config {
			describeDeviceConfig(w, 2, string(c.Source), c.Requests, c.DeviceConfiguration)
		}
	}
}

// nodeSelectorText writes a node selector's terms, ORed, of ANDed
// requirements; nil selects every node.
func nodeSelectorText(ns *k8scorev1.NodeSelector) string {
	if ns == nil {
		return "<all nodes>"
	}
	var terms []string
	for _, t := range ns.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		for _, r := range t.MatchFields {
			reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		terms = append(terms, strings.Join(reqs, " and "))
	}
	return orNone(strings.Join(terms, "; or "))
}

func describeDeviceStatuses(w *describeWriter, ds []resourcev1.AllocatedDeviceStatus) {
	if len(ds) == 0 {
		w.line(0, "Device Status:\t<none>")
		return
	}
	w.line(0, "Device Status:")
	for _, d := range ds {
		name := d.Driver + "/" + d.Pool + "/" + d.Device
		if d.ShareID != nil {
			name += " (share " + *d.ShareID + ")"
		}
		w.line(1, "%s:", name)
		var conds []string
		for _, c := range d.Conditions {
			s := string(c.Type) + "=" + string(c.Status)
			if c.Reason != "" {
				s += " (" + c.Reason + ")"
			}
			conds = append(conds, s)
		}
		w.line(2, "Conditions:\t%s", orNone(strings.Join(conds, ", ")))
		if n := d.NetworkData; n != nil {
			w.line(2, "Interface:\t%s", orNone(n.InterfaceName))
			w.line(2, "IPs:\t%s", orNone(strings.Join(n.IPs, ", ")))
			if n.HardwareAddress != "" {
				w.line(2, "Hardware Address:\t%s", n.HardwareAddress)
			}
		}
		if d.Data != nil && len(d.Data.Raw) > 0 {
			w.line(2, "Data:\t%s", rawText(*d.Data))
		}
	}
}

// describeResourceSlice describes a resource.k8s.io/v1 slice: its pool,
// where its devices are, the devices and the counters they share.
func describeResourceSlice(w *describeWriter, u *unstructured.Unstructured) error {
	var s resourcev1.ResourceSlice
	if err := fromUnstructured(u, &s); err != nil {
		return err
	}
	spec := s.Spec
	w.line(0, "Driver:\t%s", spec.Driver)
	w.line(0, "Pool:")
	w.line(1, "Name:\t%s", spec.Pool.Name)
	w.line(1, "Generation:\t%d", spec.Pool.Generation)
	w.line(1, "Slice Count:\t%d", spec.Pool.ResourceSliceCount)
	w.line(0, "Nodes:\t%s", sliceNodesText(&spec))
	describeSharedCounters(w, spec.SharedCounters)
	if len(spec.Devices) == 0 {
		w.line(0, "Devices:\t<none>")
		return nil
	}
	w.line(0, "Devices:")
	for _, d := range spec.Devices {
		w.line(1, "%s:", d.Name)
		if nodes := deviceNodesText(&d); nodes != "" {
			w.line(2, "Nodes:\t%s", nodes)
		}
		if len(d.Attributes) > 0 {
			w.line(2, "Attributes:")
			for _, k := range sortedQualified(d.Attributes) {
				w.line(3, "%s:\t%s", k, attributeText(d.Attributes[resourcev1.QualifiedName(k)]))
			}
		}
		if len(d.Capacity) > 0 {
			w.line(2, "Capacity:")
			for _, k := range sortedQualified(d.Capacity) {
				w.line(3, "%s:\t%s", k, capacityText(d.Capacity[resourcev1.QualifiedName(k)]))
			}
		}
		if len(d.ConsumesCounters) > 0 {
			w.line(2, "Consumes Counters:")
			for _, c := range d.ConsumesCounters {
				w.line(3, "%s:\t%s", c.CounterSet, countersText(c.Counters))
			}
		}
		if len(d.Taints) > 0 {
			var ts []string
			for _, t := range d.Taints {
				ts = append(ts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
			}
			w.line(2, "Taints:\t%s", strings.Join(ts, ", "))
		}
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			w.line(2, "Allow Multiple Allocations:\ttrue")
		}
		if len(d.BindingConditions) > 0 {
			w.line(2, "Binding Conditions:\t%s", strings.Join(d.BindingConditions, ", "))
		}
	}
	return nil
}

// sliceNodesText says which nodes a slice's devices are available on.
func sliceNodesText(spec *resourcev1.ResourceSliceSpec) string {
	if t := nodeChoiceText(spec.NodeName, spec.NodeSelector, spec.AllNodes); t != "" {
		return t
	}
	if spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection {
		return "per device"
	}
	return "<none>"
}

// deviceNodesText is a device's own node selection (with
// perDeviceNodeSelection), or "".
func deviceNodesText(d *resourcev1.Device) string {
	return nodeChoiceText(d.NodeName, d.NodeSelector, d.AllNodes)
}

// nodeChoiceText is one of a slice's or device's node choices, or "".
func nodeChoiceText(name *string, sel *k8scorev1.NodeSelector, all *bool) string {
	switch {
	case name != nil && *name != "":
		return "node " + *name
	case sel != nil:
		return "selected by " + nodeSelectorText(sel)
	case all != nil && *all:
		return "all nodes"
	}
	return ""
}

func describeSharedCounters(w *describeWriter, sets []resourcev1.CounterSet) {
	if len(sets) == 0 {
		w.line(0, "Shared Counters:\t<none>")
		return
	}
	w.line(0, "Shared Counters:")
	for _, s := range sets {
		w.line(1, "%s:\t%s", s.Name, countersText(s.Counters))
	}
}

// countersText is "name=value, ..." in name order.
func countersText(cs map[string]resourcev1.Counter) string {
	names := sortedKeys(cs)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := cs[n].Value
		parts = append(parts, n+"="+q.String())
	}
	return orNone(strings.Join(parts, ", "))
}

func sortedQualified[V any](m map[resourcev1.QualifiedName]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	return keys
}

func attributeText(a resourcev1.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return strconv.Quote(*a.StringValue)
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	case a.VersionValue != nil:
		return "version " + *a.VersionValue
	case a.StringValues != nil:
		qs := make([]string, len(a.StringValues))
		for i, s := range a.StringValues {
			qs[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(qs, ", ") + "]"
	case a.IntValues != nil:
		return fmt.Sprint(a.IntValues)
	case a.BoolValues != nil:
		return fmt.Sprint(a.BoolValues)
	case a.VersionValues != nil:
		return "versions " + fmt.Sprint(a.VersionValues)
	}
	return "<none>"
}

func capacityText(c resourcev1.DeviceCapacity) string {
	s := c.Value.String()
	p := c.RequestPolicy
	if p == nil {
		return s
	}
	var pol []string
	if p.Default != nil {
		pol = append(pol, "default "+p.Default.String())
	}
	if len(p.ValidValues) > 0 {
		vs := make([]string, len(p.ValidValues))
		for i, v := range p.ValidValues {
			vs[i] = v.String()
		}
		pol = append(pol, "values "+strings.Join(vs, ", "))
	}
	if r := p.ValidRange; r != nil {
		rs := "range"
		if r.Min != nil {
			rs += " min " + r.Min.String()
		}
		if r.Max != nil {
			rs += " max " + r.Max.String()
		}
		if r.Step != nil {
			rs += " step " + r.Step.String()
		}
		pol = append(pol, rs)
	}
	if len(pol) == 0 {
		return s
	}
	return s + " (" + strings.Join(pol, "; ") + ")"
}

func quantitiesText(m map[resourcev1.QualifiedName]resource.Quantity) string {
	var parts []string
	for _, k := range sortedQualified(m) {
		q := m[resourcev1.QualifiedName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

// describeDeviceClass describes a resource.k8s.io/v1 device class: which
// devices it selects and the configuration it adds.
func describeDeviceClass(w *describeWriter, u *unstructured.Unstructured) error {
	var c resourcev1.DeviceClass
	if err := fromUnstructured(u, &c); err != nil {
		return err
	}
	describeSelectors(w, 0, c.Spec.Selectors)
	if len(c.Spec.Config) == 0 {
		w.line(0, "Config:\t<none>")
	} else {
		w.line(0, "Config:")
		for _, cfg := range c.Spec.Config {
			o := cfg.Opaque
			if o == nil {
				w.line(1, "- Driver:\t<none>")
				continue
			}
			w.line(1, "- Driver:\t%s", o.Driver)
			w.line(1, "  Parameters:\t%s", rawText(o.Parameters))
		}
	}
	if c.Spec.ExtendedResourceName != nil {
		w.line(0, "Extended Resource Name:\t%s", *c.Spec.ExtendedResourceName)
	}
	return nil
}
