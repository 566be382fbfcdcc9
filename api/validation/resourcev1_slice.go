package validation

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CapacityRequestPolicy: "Must not contain more than 10 entries." (no
// constant upstream).
const capacityValidValuesMaxSize = 10

var (
	sliceNodeSelection  = []string{"nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"}
	deviceNodeSelection = []string{"nodeName", "nodeSelector", "allNodes"}
)

// ValidateResourceSlice checks a ResourceSlice being created.
func ValidateResourceSlice(s *resourcev1.ResourceSlice) field.ErrorList {
	errs := validateObjectMeta(&s.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateResourceSliceSpecV1(&s.Spec, nil, field.NewPath("spec"))...)
}

// ValidateResourceSliceUpdate checks a write to a ResourceSlice: the spec
// is validated again, and spec.driver, spec.pool.name and spec.nodeName
// may not change ("This field is immutable." on each).
func ValidateResourceSliceUpdate(newS, oldS *resourcev1.ResourceSlice) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateResourceSliceSpecV1(&newS.Spec, &oldS.Spec, p)...)
	errs = append(errs, immutable(newS.Spec.Driver, oldS.Spec.Driver, p.Child("driver"))...)
	errs = append(errs, immutable(newS.Spec.Pool.Name, oldS.Spec.Pool.Name, p.Child("pool", "name"))...)
	if !equalStringPtr(newS.Spec.NodeName, oldS.Spec.NodeName) {
		errs = append(errs, field.Invalid(p.Child("nodeName"), derefOr(newS.Spec.NodeName, "<unset>"), msgImmutable))
	}
	return errs
}

func equalStringPtr(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

func validateResourceSliceSpecV1(spec, old *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	errs := resourcev1.Validate_ResourceSliceSpec(context.Background(), v1Op(old != nil), path, spec, old)
	errs = append(errs, validateDriverNameV1(spec.Driver, path.Child("driver"))...)
	pp := path.Child("pool")
	errs = append(errs, validatePoolNameV1(spec.Pool.Name, pp.Child("name"))...)
	errs = append(errs, nonNegative(pp.Child("generation"), spec.Pool.Generation)...)
	// "ResourceSliceCount is the total number of ResourceSlices in the pool
	// at this generation number. Must be greater than zero."
	if spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(pp.Child("resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	errs = append(errs, validateSliceNodeSelection(spec, path)...)
	// "Only one of Devices and SharedCounters can be set in a
	// ResourceSlice." Counter sets live in slices of their own; devices in
	// other slices of the pool consume from them.
	if len(spec.Devices) > 0 && len(spec.SharedCounters) > 0 {
		errs = append(errs, field.Forbidden(path.Child("sharedCounters"), "may not be set in a slice that lists `devices`: a pool publishes its counter sets in slices without devices"))
	}
	errs = append(errs, validateSliceDevices(spec, path.Child("devices"))...)
	errs = append(errs, validateCounterSets(spec.SharedCounters, path.Child("sharedCounters"))...)
	if spec.PartitionTypeAttribute != nil {
		errs = append(errs, validatePartitionTypeAttribute(spec, path)...)
	}
	errs = append(errs, validateSkipNodeOperationsV1(spec.SkipNodeOperations, path.Child("skipNodeOperations"))...)
	var oldUses featureUses
	if old != nil {
		oldUses = sliceFeatures(old, path)
	}
	return append(errs, sliceFeatures(spec, path).refuse(oldUses)...)
}

// validateSliceNodeSelection: "Exactly one of NodeName, NodeSelector,
// AllNodes, and PerDeviceNodeSelection must be set." The booleans count
// only when true; a nodeSelector "Must use exactly one term."
func validateSliceNodeSelection(spec *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if spec.NodeName != nil {
		set = append(set, "nodeName")
		errs = append(errs, validateNodeNameV1(*spec.NodeName, path.Child("nodeName"))...)
	}
	if spec.NodeSelector != nil {
		set = append(set, "nodeSelector")
		errs = append(errs, validateNodeSelectorV1(spec.NodeSelector, path.Child("nodeSelector"), true)...)
	}
	if spec.AllNodes != nil {
		if *spec.AllNodes {
			set = append(set, "allNodes")
		} else {
			errs = append(errs, field.Invalid(path.Child("allNodes"), false, "must be unset or true"))
		}
	}
	if spec.PerDeviceNodeSelection != nil {
		if *spec.PerDeviceNodeSelection {
			set = append(set, "perDeviceNodeSelection")
		} else {
			errs = append(errs, field.Invalid(path.Child("perDeviceNodeSelection"), false, "must be unset or true"))
		}
	}
	return append(errs, oneOf(path, sliceNodeSelection, set)...)
}

func validateNodeNameV1(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Invalid(path, name, "must be unset or the name of a node")}
	}
	return dnsSubdomain(path, name)
}

// sliceUsesAdvancedFeatures reports whether a device uses one of the
// features that lower the device limit of a slice
// (ResourceSliceMaxDevicesWithAdvancedFeatures): taints, consumed counters,
// list attributes.
func sliceUsesAdvancedFeatures(devices []resourcev1.Device) bool {
	for i := range devices {
		d := &devices[i]
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			return true
		}
		for _, a := range d.Attributes {
			if a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil {
				return true
			}
		}
	}
	return false
}

// validateSliceDevices: "Must not have more than 128 entries. If any device
// uses taints or consumes counters the limit is 64." (and list attributes,
// says ResourceSliceMaxDevicesWithAdvancedFeatures). Device names are
// unique: "Each device in a given pool, regardless of how many
// ResourceSlices, must have a unique name." Beyond the limit no device is
// looked at.
func validateSliceDevices(spec *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	limit := resourcev1.ResourceSliceMaxDevices
	if sliceUsesAdvancedFeatures(spec.Devices) {
		limit = resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures
	}
	if len(spec.Devices) > limit {
		return field.ErrorList{field.TooMany(path, len(spec.Devices), limit)}
	}
	perDevice := spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection
	var errs field.ErrorList
	var names unique
	for i := range spec.Devices {
		d, p := &spec.Devices[i], path.Index(i)
		errs = append(errs, required(p.Child("name"), d.Name, dnsLabel)...)
		if d.Name != "" {
			errs = append(errs, names.check(d.Name, p.Child("name"))...)
		}
		errs = append(errs, validateDeviceV1(d, p, perDevice)...)
	}
	return errs
}

func validateDeviceV1(d *resourcev1.Device, path *field.Path, perDevice bool) field.ErrorList {
	var errs field.ErrorList
	// "The maximum number of attributes and capacities combined is 32."
	if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		errs = append(errs, field.Invalid(path, omit, fmt.Sprintf("has %d attributes and capacities together, at most %d are allowed", n, resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
		return errs
	}
	// ResourceSliceMaxAttributeValuesPerDevice: "Limit per device for the
	// total number of string, version, bool or int values in list and
	// non-list attributes."
	if n := attributeValueCount(d); n > resourcev1.ResourceSliceMaxAttributeValuesPerDevice {
		errs = append(errs, field.Invalid(path.Child("attributes"), omit, fmt.Sprintf("has %d values, at most %d are allowed", n, resourcev1.ResourceSliceMaxAttributeValuesPerDevice)))
	}
	ap := path.Child("attributes")
	for _, k := range sortedKeys(d.Attributes) {
		a, p := d.Attributes[k], keyPath(ap, string(k))
		errs = append(errs, validateQualifiedNameV1(string(k), p)...)
		errs = append(errs, validateAttributeV1(&a, p)...)
	}
	multiple := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
	cp := path.Child("capacity")
	for _, k := range sortedKeys(d.Capacity) {
		c, p := d.Capacity[k], keyPath(cp, string(k))
		errs = append(errs, validateQualifiedNameV1(string(k), p)...)
		errs = append(errs, nonNegativeQuantity(p.Child("value"), c.Value)...)
		if c.RequestPolicy != nil {
			if !multiple {
				// "The Device must have allowMultipleAllocations set to
				// true in order to set a requestPolicy."
				errs = append(errs, field.Forbidden(p.Child("requestPolicy"), "may only be set when `allowMultipleAllocations` is true"))
			} else {
				errs = append(errs, validateRequestPolicy(c.Value, c.RequestPolicy, p.Child("requestPolicy"))...)
			}
		}
	}
	errs = append(errs, validateDeviceTaintsV1(d.Taints, path.Child("taints"))...)
	errs = append(errs, validateCounterConsumptions(d.ConsumesCounters, path.Child("consumesCounters"))...)
	errs = append(errs, validateDeviceNodeSelection(d, path, perDevice)...)
	errs = append(errs, validateBindingConditionsV1(d.BindingConditions, d.BindingFailureConditions, path)...)
	return append(errs, validateNodeAllocatableResources(d, path.Child("nodeAllocatableResources"))...)
}

// attributeValueCount counts each scalar attribute as one value and each
// list attribute as its length.
func attributeValueCount(d *resourcev1.Device) int {
	n := 0
	for _, a := range d.Attributes {
		l := len(a.IntValues) + len(a.BoolValues) + len(a.StringValues) + len(a.VersionValues)
		if l == 0 {
			l = 1
		}
		n += l
	}
	return n
}

// validateAttributeV1 checks an attribute's value. Exactly one value field
// ("DeviceAttribute must have exactly one field set"): generated
// validation. "StringValue is a string. Must not be longer than 64
// characters."; "VersionValue is a semantic version according to
// semver.org spec 2.0.0. Must not be longer than 64 characters." The list
// forms (DRAListTypeAttributes) are "non-empty".
func validateAttributeV1(a *resourcev1.DeviceAttribute, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.StringValue != nil {
		errs = append(errs, maxLen(path.Child("string"), *a.StringValue, resourcev1.DeviceAttributeMaxValueLength)...)
	}
	if a.VersionValue != nil {
		errs = append(errs, validateVersionV1(*a.VersionValue, path.Child("version"))...)
	}
	for _, l := range []struct {
		name  string
		isSet bool
		n     int
	}{
		{"ints", a.IntValues != nil, len(a.IntValues)},
		{"bools", a.BoolValues != nil, len(a.BoolValues)},
		{"strings", a.StringValues != nil, len(a.StringValues)},
		{"versions", a.VersionValues != nil, len(a.VersionValues)},
	} {
		if l.isSet && l.n == 0 {
			errs = append(errs, field.Required(path.Child(l.name), "must not be empty when set"))
		}
	}
	// Each string of `strings` (64 bytes at most) is checked by the
	// generated validation.
	for i, v := range a.VersionValues {
		errs = append(errs, validateVersionV1(v, path.Child("versions").Index(i))...)
	}
	return errs
}

// validateCounterSets checks what the generated validation does not: "The
// maximum number of counters is 32." per set, and no negative counter. At
// most 8 sets, unique set names, DNS-label set and counter names, at least
// one counter: generated validation.
func validateCounterSets(sets []resourcev1.CounterSet, path *field.Path) field.ErrorList {
	if len(sets) > resourcev1.ResourceSliceMaxCounterSets {
		return nil
	}
	var errs field.ErrorList
	for i, s := range sets {
		errs = append(errs, validateCounters(s.Counters, resourcev1.ResourceSliceMaxCountersPerCounterSet, path.Index(i).Child("counters"))...)
	}
	return errs
}

func validateCounters(counters map[string]resourcev1.Counter, limit int, path *field.Path) field.ErrorList {
	if len(counters) > limit {
		return field.ErrorList{field.TooMany(path, len(counters), limit)}
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(counters) {
		errs = append(errs, nonNegativeQuantity(keyPath(path, k).Child("value"), counters[k].Value)...)
	}
	return errs
}

// validateCounterConsumptions: "The maximum number of counters is 32." per
// consumption. "There can only be a single entry per counterSet." and at
// most 2 entries: generated validation.
//
// Whether consumesCounters[].counterSet names a counter set, and the
// counters one of its counters, is not checked here: "Only one of Devices
// and SharedCounters can be set in a ResourceSlice", so the sets are
// always published in another slice of the pool, which a check of one
// object cannot see. The allocator has to treat a reference to a missing
// set or counter as making the device unallocatable.
func validateCounterConsumptions(cons []resourcev1.DeviceCounterConsumption, path *field.Path) field.ErrorList {
	if len(cons) > resourcev1.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
		return nil
	}
	var errs field.ErrorList
	for i, c := range cons {
		errs = append(errs, validateCounters(c.Counters, resourcev1.ResourceSliceMaxCountersPerDeviceCounterConsumption, path.Index(i).Child("counters"))...)
	}
	return errs
}

// validateDeviceNodeSelection: a device's nodeName, nodeSelector and
// allNodes "Must only be set if Spec.PerDeviceNodeSelection is set to
// true"; then exactly one of them is set ("If it is set to true, every
// device defined the ResourceSlice must specify this individually.").
func validateDeviceNodeSelection(d *resourcev1.Device, path *field.Path, perDevice bool) field.ErrorList {
	var errs field.ErrorList
	if !perDevice {
		const msg = "may only be set when `spec.perDeviceNodeSelection` is true"
		if d.NodeName != nil {
			errs = append(errs, field.Forbidden(path.Child("nodeName"), msg))
		}
		if d.NodeSelector != nil {
			errs = append(errs, field.Forbidden(path.Child("nodeSelector"), msg))
		}
		if d.AllNodes != nil {
			errs = append(errs, field.Forbidden(path.Child("allNodes"), msg))
		}
		return errs
	}
	var set []string
	if d.NodeName != nil {
		set = append(set, "nodeName")
		errs = append(errs, validateNodeNameV1(*d.NodeName, path.Child("nodeName"))...)
	}
	if d.NodeSelector != nil {
		set = append(set, "nodeSelector")
		errs = append(errs, validateNodeSelectorV1(d.NodeSelector, path.Child("nodeSelector"), true)...)
	}
	if d.AllNodes != nil {
		if *d.AllNodes {
			set = append(set, "allNodes")
		} else {
			errs = append(errs, field.Invalid(path.Child("allNodes"), false, "must be unset or true"))
		}
	}
	return append(errs, oneOf(path, deviceNodeSelection, set)...)
}

// validatePartitionTypeAttribute (DRAPartitionableDevicesType): "When set,
// every partitionable device in the slice must carry the attribute", as a
// string (it labels the partition type). The name format is checked by
// the generated validation.
func validatePartitionTypeAttribute(spec *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	name := string(*spec.PartitionTypeAttribute)
	if !strings.Contains(name, "/") {
		return nil // not fully qualified: reported by the generated validation
	}
	bare, _ := strings.CutPrefix(name, spec.Driver+"/")
	var errs field.ErrorList
	partitionable := false
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if len(d.ConsumesCounters) == 0 {
			continue
		}
		partitionable = true
		a, ok := d.Attributes[resourcev1.QualifiedName(name)]
		if !ok {
			a, ok = d.Attributes[resourcev1.QualifiedName(bare)]
		}
		ap := keyPath(path.Child("devices").Index(i).Child("attributes"), name)
		switch {
		case !ok:
			errs = append(errs, field.Required(ap, "the device consumes counters, so it must have the attribute named by `spec.partitionTypeAttribute`"))
		case a.StringValue == nil:
			errs = append(errs, field.Invalid(ap, omit, "must be a string: `spec.partitionTypeAttribute` names it"))
		}
	}
	if !partitionable {
		errs = append(errs, field.Invalid(path.Child("partitionTypeAttribute"), name, "may only be set in a slice with devices that consume counters"))
	}
	return errs
}

// validateNodeAllocatableResources (DRANodeAllocatableResources): keys are
// node allocatable resources other than extended resources ("cpu",
// "memory", "ephemeral-storage", "hugepages-<size>"); "At least one of
// Mapping or Overhead must be specified."; a mapping's capacityKey names a
// capacity of the device and its multipliers are positive; an overhead
// sets perPod or perContainer, neither negative.
func validateNodeAllocatableResources(d *resourcev1.Device, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(d.NodeAllocatableResources) {
		r, p := d.NodeAllocatableResources[name], keyPath(path, string(name))
		if n := string(name); n != "cpu" && n != "memory" && n != "ephemeral-storage" && !strings.HasPrefix(n, "hugepages-") {
			errs = append(errs, field.Invalid(p, n, "must be a node allocatable resource: cpu, memory, ephemeral-storage or hugepages-<size>"))
		}
		if r.Mapping == nil && r.Overhead == nil {
			errs = append(errs, field.Required(p, "at least one of `mapping` and `overhead` is required"))
		}
		if m := r.Mapping; m != nil {
			mp := p.Child("mapping")
			if m.CapacityKey != nil {
				if _, ok := d.Capacity[*m.CapacityKey]; !ok {
					errs = append(errs, field.NotFound(mp.Child("capacityKey"), string(*m.CapacityKey)))
				}
			}
			errs = append(errs, positiveQuantity(mp.Child("capacityMultiplier"), m.CapacityMultiplier)...)
			errs = append(errs, positiveQuantity(mp.Child("deviceMultiplier"), m.DeviceMultiplier)...)
		}
		if o := r.Overhead; o != nil {
			op := p.Child("overhead")
			if o.PerPod == nil && o.PerContainer == nil {
				errs = append(errs, field.Required(op, "at least one of `perPod` and `perContainer` is required"))
			}
			if o.PerPod != nil {
				errs = append(errs, nonNegativeQuantity(op.Child("perPod"), *o.PerPod)...)
			}
			if o.PerContainer != nil {
				errs = append(errs, nonNegativeQuantity(op.Child("perContainer"), *o.PerContainer)...)
			}
		}
	}
	return errs
}

func positiveQuantity(path *field.Path, q *resource.Quantity) field.ErrorList {
	if q != nil && q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be greater than zero")}
	}
	return nil
}

// validateRequestPolicy (DRAConsumableCapacity) checks a capacity's
// request policy as its comments state: "Must not set more than one
// ValidRequestValues"; with validValues ("Must not contain more than 10
// entries. Must be sorted in ascending order.") or validRange, "Default
// must be defined" and be one of the values or inside the range; the range
// has a min "greater than or equal to zero, and less than or equal to the
// capacity value", a max at most the capacity and at least min, a positive
// step with "Min + Step [...] less than or equal to the capacity value",
// and max and default are min plus a multiple of step.
func validateRequestPolicy(capacity resource.Quantity, p *resourcev1.CapacityRequestPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(p.ValidValues) > 0 && p.ValidRange != nil {
		return field.ErrorList{field.Invalid(path, omit, "may specify only one of: `validValues`, `validRange`")}
	}
	if p.Default != nil {
		errs = append(errs, nonNegativeQuantity(path.Child("default"), *p.Default)...)
		if p.Default.Cmp(capacity) > 0 {
			errs = append(errs, field.Invalid(path.Child("default"), p.Default.String(), "must not be larger than the capacity value "+capacity.String()))
		}
	}
	if (len(p.ValidValues) > 0 || p.ValidRange != nil) && p.Default == nil {
		return append(errs, field.Required(path.Child("default"), "must be set when `validValues` or `validRange` is set"))
	}
	if len(p.ValidValues) > 0 {
		vp := path.Child("validValues")
		if len(p.ValidValues) > capacityValidValuesMaxSize {
			return append(errs, field.TooMany(vp, len(p.ValidValues), capacityValidValuesMaxSize))
		}
		found := false
		for i, v := range p.ValidValues {
			if i > 0 && v.Cmp(p.ValidValues[i-1]) <= 0 {
				errs = append(errs, field.Invalid(vp.Index(i), v.String(), "values must be unique and sorted in ascending order"))
			}
			if v.Cmp(capacity) > 0 {
				errs = append(errs, field.Invalid(vp.Index(i), v.String(), "must not be larger than the capacity value "+capacity.String()))
			}
			found = found || v.Cmp(*p.Default) == 0
		}
		if !found {
			errs = append(errs, field.Invalid(path.Child("default"), p.Default.String(), "must be one of `validValues`"))
		}
	}
	if r := p.ValidRange; r != nil {
		errs = append(errs, validateRequestPolicyRange(capacity, *p.Default, r, path.Child("validRange"), path.Child("default"))...)
	}
	return errs
}

func validateRequestPolicyRange(capacity, def resource.Quantity, r *resourcev1.CapacityRequestPolicyRange, path, defPath *field.Path) field.ErrorList {
	if r.Min == nil {
		return field.ErrorList{field.Required(path.Child("min"), "must be set in a `validRange`")}
	}
	errs := nonNegativeQuantity(path.Child("min"), *r.Min)
	if r.Min.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(path.Child("min"), r.Min.String(), "must not be larger than the capacity value "+capacity.String()))
	}
	if def.Cmp(*r.Min) < 0 {
		errs = append(errs, field.Invalid(defPath, def.String(), "must not be less than `validRange.min`"))
	}
	if r.Max != nil {
		if r.Max.Cmp(*r.Min) < 0 {
			errs = append(errs, field.Invalid(path.Child("max"), r.Max.String(), "must not be less than `min`"))
		}
		if r.Max.Cmp(capacity) > 0 {
			errs = append(errs, field.Invalid(path.Child("max"), r.Max.String(), "must not be larger than the capacity value "+capacity.String()))
		}
		if def.Cmp(*r.Max) > 0 {
			errs = append(errs, field.Invalid(defPath, def.String(), "must not be more than `validRange.max`"))
		}
	}
	if r.Step != nil {
		sp := path.Child("step")
		if r.Step.Sign() <= 0 {
			return append(errs, field.Invalid(sp, r.Step.String(), "must be greater than zero"))
		}
		next := r.Min.DeepCopy()
		next.Add(*r.Step)
		if next.Cmp(capacity) > 0 {
			errs = append(errs, field.Invalid(sp, r.Step.String(), "`min` plus one step must not be larger than the capacity value "+capacity.String()))
		}
		if !isStepFrom(def, *r.Min, *r.Step) {
			errs = append(errs, field.Invalid(defPath, def.String(), "must be `validRange.min` plus a multiple of `validRange.step`"))
		}
		if r.Max != nil && !isStepFrom(*r.Max, *r.Min, *r.Step) {
			errs = append(errs, field.Invalid(path.Child("max"), r.Max.String(), "must be `min` plus a multiple of `step`"))
		}
	}
	return errs
}

// isStepFrom reports whether v - min is a whole multiple of step (> 0),
// exactly (math/big), whatever the amounts' size or precision: before
// issue 25 it was computed in thousandths of an int64, and amounts too
// large for that passed unchecked.
func isStepFrom(v, min, step resource.Quantity) bool {
	if step.Sign() <= 0 {
		return true // positiveQuantity reports it
	}
	d := new(big.Rat).Sub(ratOfQuantity(&v), ratOfQuantity(&min))
	return d.Quo(d, ratOfQuantity(&step)).IsInt()
}
