package validation

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// V1Feature is a part of the resource.k8s.io/v1 API that Kubernetes puts
// behind a feature gate. Most are a whole gate and carry its name; two gates
// are split: DRAConsumableCapacity (distinctAttribute, and shared devices
// with their capacity requests, each a row) and DRADeviceTaints (the
// NoSchedule and None effects, and NoExecute with device taint eviction,
// each a row); all of them implemented.
type V1Feature string

// The features of resource.k8s.io/v1 in Kubernetes 1.37.
const (
	V1FeaturePrioritizedList          V1Feature = "DRAPrioritizedList"
	V1FeatureAdminAccess              V1Feature = "DRAAdminAccess"
	V1FeaturePartitionableDevices     V1Feature = "DRAPartitionableDevices"
	V1FeatureDeviceTaints             V1Feature = "DRADeviceTaints"
	V1FeatureDeviceTaintNoExecute     V1Feature = "DRADeviceTaints/NoExecute"
	V1FeatureDeviceTaintRules         V1Feature = "DRADeviceTaintRules"
	V1FeatureDistinctAttribute        V1Feature = "DRAConsumableCapacity/distinctAttribute"
	V1FeatureConsumableCapacity       V1Feature = "DRAConsumableCapacity"
	V1FeatureBindingConditions        V1Feature = "DRADeviceBindingConditions"
	V1FeatureDeviceStatus             V1Feature = "DRAResourceClaimDeviceStatus"
	V1FeatureExtendedResource         V1Feature = "DRAExtendedResource"
	V1FeatureListTypeAttributes       V1Feature = "DRAListTypeAttributes"
	V1FeatureDerivedAttributes        V1Feature = "DRADerivedAttributes"
	V1FeatureCompatibilityGroups      V1Feature = "DRADeviceCompatibilityGroups"
	V1FeatureOptionalNodeOperations   V1Feature = "DRAOptionalNodeOperations"
	V1FeatureNodeAllocatableResources V1Feature = "DRANodeAllocatableResources"
	V1FeaturePartitionTypeAttribute   V1Feature = "DRAPartitionableDevicesType"
)

// V1FeatureState is how allot treats the fields of one V1Feature.
type V1FeatureState struct {
	// Gate is the Kubernetes feature gate the fields belong to.
	Gate string
	// Kubernetes is the gate's default in Kubernetes 1.37. Fields of a gate
	// that is off there are refused: "feature gate X is disabled".
	Kubernetes bool
	// Allot says whether allot implements the fields. Fields of a gate
	// that is on in Kubernetes but not implemented here are refused: "not
	// supported by allot yet".
	Allot bool
	// Fields names the fields, for people reading the table.
	Fields string
}

// V1Features is the one place that decides which gated fields of
// resource.k8s.io/v1 allot accepts. Turning a feature on is a change of
// its row. Treat it as read-only at run time: validation reads it
// concurrently.
//
// A refused field is refused when an object is created, and on update
// only when the stored object did not use the same feature already, so
// objects stored before a feature was turned off stay writable. A field
// is never dropped silently.
var V1Features = map[V1Feature]V1FeatureState{
	V1FeaturePrioritizedList: {Gate: "DRAPrioritizedList", Kubernetes: true, Allot: true,
		Fields: "requests[].firstAvailable"},
	V1FeatureAdminAccess: {Gate: "DRAAdminAccess", Kubernetes: true, Allot: true,
		Fields: "requests[].exactly.adminAccess, allocation results[].adminAccess"},
	V1FeaturePartitionableDevices: {Gate: "DRAPartitionableDevices", Kubernetes: true, Allot: true,
		Fields: "slice sharedCounters, perDeviceNodeSelection; device consumesCounters, nodeName, nodeSelector, allNodes"},
	V1FeatureDeviceTaints: {Gate: "DRADeviceTaints", Kubernetes: true, Allot: true,
		Fields: "device taints, request and result tolerations"},
	V1FeatureDeviceTaintNoExecute: {Gate: "DRADeviceTaints", Kubernetes: true, Allot: true,
		Fields: "taints and tolerations with effect NoExecute (evicted by the controller manager's device taint eviction)"},
	V1FeatureDeviceTaintRules: {Gate: "DRADeviceTaintRules", Kubernetes: true, Allot: true,
		Fields: "the DeviceTaintRule kind"},
	V1FeatureDistinctAttribute: {Gate: "DRAConsumableCapacity", Kubernetes: true, Allot: true,
		Fields: "constraints[].distinctAttribute"},
	V1FeatureConsumableCapacity: {Gate: "DRAConsumableCapacity", Kubernetes: true, Allot: true,
		Fields: "device allowMultipleAllocations (true), capacity requestPolicy; request capacity; result shareID, consumedCapacity; status.devices[].shareID"},
	V1FeatureBindingConditions: {Gate: "DRADeviceBindingConditions", Kubernetes: true, Allot: true,
		Fields: "device bindsToNode (true), bindingConditions, bindingFailureConditions; the same in allocation results"},
	V1FeatureDeviceStatus: {Gate: "DRAResourceClaimDeviceStatus", Kubernetes: true, Allot: true,
		Fields: "claim status.devices"},
	V1FeatureExtendedResource: {Gate: "DRAExtendedResource", Kubernetes: true, Allot: true,
		Fields: "DeviceClass spec.extendedResourceName"},
	V1FeatureListTypeAttributes: {Gate: "DRAListTypeAttributes", Kubernetes: false, Allot: false,
		Fields: "device attributes ints, bools, strings, versions"},
	V1FeatureDerivedAttributes: {Gate: "DRADerivedAttributes", Kubernetes: false, Allot: false,
		Fields: "requests[].exactly.derivedAttributes, firstAvailable[].derivedAttributes"},
	V1FeatureCompatibilityGroups: {Gate: "DRADeviceCompatibilityGroups", Kubernetes: false, Allot: false,
		Fields: "device consumesCounters[].compatibilityGroups"},
	V1FeatureOptionalNodeOperations: {Gate: "DRAOptionalNodeOperations", Kubernetes: false, Allot: false,
		Fields: "slice skipNodeOperations, allocation results[].skipNodeOperations"},
	V1FeatureNodeAllocatableResources: {Gate: "DRANodeAllocatableResources", Kubernetes: false, Allot: false,
		Fields: "device nodeAllocatableResources"},
	V1FeaturePartitionTypeAttribute: {Gate: "DRAPartitionableDevicesType", Kubernetes: false, Allot: false,
		Fields: "slice partitionTypeAttribute (alpha)"},
}

// V1FeatureEnabled reports whether allot accepts the fields of f: the gate
// is on in Kubernetes 1.37 and allot implements them.
func V1FeatureEnabled(f V1Feature) bool {
	s, ok := V1Features[f]
	return ok && s.Kubernetes && s.Allot
}

// v1FeatureRefusal is the reason a field of f is refused, or "" when it is
// accepted.
func v1FeatureRefusal(f V1Feature) string {
	s, ok := V1Features[f]
	switch {
	case !ok:
		return fmt.Sprintf("feature %s is unknown to allot", f)
	case !s.Kubernetes:
		return fmt.Sprintf("feature gate %s is disabled (as in Kubernetes 1.37)", s.Gate)
	case !s.Allot:
		return "not supported by allot yet"
	}
	return ""
}

// featureUse is one gated field that an object sets. A pointer is set
// when it is not nil (a boolean that only switches a feature on counts when
// true), a list or map when it is not empty, except the list values of an
// attribute, whose empty form is a use of the field (and invalid).
type featureUse struct {
	feature V1Feature
	path    *field.Path
}

// featureUses collects the gated fields an object sets.
type featureUses []featureUse

func (u *featureUses) add(f V1Feature, path *field.Path) {
	*u = append(*u, featureUse{f, path})
}

func (u featureUses) has(f V1Feature) bool {
	for _, use := range u {
		if use.feature == f {
			return true
		}
	}
	return false
}

// refuse reports each use of a feature that allot does not accept, unless
// old (the stored object's uses, nil on create) uses the same feature.
func (u featureUses) refuse(old featureUses) field.ErrorList {
	var errs field.ErrorList
	for _, use := range u {
		reason := v1FeatureRefusal(use.feature)
		if reason == "" || old.has(use.feature) {
			continue
		}
		errs = append(errs, field.Forbidden(use.path, reason))
	}
	return errs
}

// sliceFeatures lists the gated fields of a ResourceSlice spec.
func sliceFeatures(spec *resourcev1.ResourceSliceSpec, path *field.Path) featureUses {
	var u featureUses
	if spec.PerDeviceNodeSelection != nil {
		u.add(V1FeaturePartitionableDevices, path.Child("perDeviceNodeSelection"))
	}
	if len(spec.SharedCounters) > 0 {
		u.add(V1FeaturePartitionableDevices, path.Child("sharedCounters"))
	}
	if spec.PartitionTypeAttribute != nil {
		u.add(V1FeaturePartitionTypeAttribute, path.Child("partitionTypeAttribute"))
	}
	if len(spec.SkipNodeOperations) > 0 {
		u.add(V1FeatureOptionalNodeOperations, path.Child("skipNodeOperations"))
	}
	for i := range spec.Devices {
		d, dp := &spec.Devices[i], path.Child("devices").Index(i)
		for _, k := range sortedKeys(d.Attributes) {
			a, ap := d.Attributes[k], dp.Child("attributes").Key(string(k))
			for _, l := range []struct {
				name string
				set  bool
			}{{"ints", a.IntValues != nil}, {"bools", a.BoolValues != nil}, {"strings", a.StringValues != nil}, {"versions", a.VersionValues != nil}} {
				if l.set {
					u.add(V1FeatureListTypeAttributes, ap.Child(l.name))
				}
			}
		}
		for _, k := range sortedKeys(d.Capacity) {
			if d.Capacity[k].RequestPolicy != nil {
				u.add(V1FeatureConsumableCapacity, dp.Child("capacity").Key(string(k)).Child("requestPolicy"))
			}
		}
		if len(d.ConsumesCounters) > 0 {
			u.add(V1FeaturePartitionableDevices, dp.Child("consumesCounters"))
		}
		for j, c := range d.ConsumesCounters {
			if len(c.CompatibilityGroups) > 0 {
				u.add(V1FeatureCompatibilityGroups, dp.Child("consumesCounters").Index(j).Child("compatibilityGroups"))
			}
		}
		if d.NodeName != nil {
			u.add(V1FeaturePartitionableDevices, dp.Child("nodeName"))
		}
		if d.NodeSelector != nil {
			u.add(V1FeaturePartitionableDevices, dp.Child("nodeSelector"))
		}
		if d.AllNodes != nil {
			u.add(V1FeaturePartitionableDevices, dp.Child("allNodes"))
		}
		taintFeatures(&u, d.Taints, dp.Child("taints"))
		// false is what a device without the feature does: not a use.
		if d.BindsToNode != nil && *d.BindsToNode {
			u.add(V1FeatureBindingConditions, dp.Child("bindsToNode"))
		}
		if len(d.BindingConditions) > 0 {
			u.add(V1FeatureBindingConditions, dp.Child("bindingConditions"))
		}
		if len(d.BindingFailureConditions) > 0 {
			u.add(V1FeatureBindingConditions, dp.Child("bindingFailureConditions"))
		}
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			u.add(V1FeatureConsumableCapacity, dp.Child("allowMultipleAllocations"))
		}
		if len(d.NodeAllocatableResources) > 0 {
			u.add(V1FeatureNodeAllocatableResources, dp.Child("nodeAllocatableResources"))
		}
	}
	return u
}

func taintFeatures(u *featureUses, taints []resourcev1.DeviceTaint, path *field.Path) {
	if len(taints) > 0 {
		u.add(V1FeatureDeviceTaints, path)
	}
	for i, t := range taints {
		if t.Effect == resourcev1.DeviceTaintEffectNoExecute {
			u.add(V1FeatureDeviceTaintNoExecute, path.Index(i).Child("effect"))
		}
	}
}

func tolerationFeatures(u *featureUses, tols []resourcev1.DeviceToleration, path *field.Path) {
	if len(tols) > 0 {
		u.add(V1FeatureDeviceTaints, path)
	}
	for i, t := range tols {
		if t.Effect == resourcev1.DeviceTaintEffectNoExecute {
			u.add(V1FeatureDeviceTaintNoExecute, path.Index(i).Child("effect"))
		}
	}
}

// claimSpecFeatures lists the gated fields of a claim spec.
func claimSpecFeatures(spec *resourcev1.ResourceClaimSpec, path *field.Path) featureUses {
	var u featureUses
	dp := path.Child("devices")
	for i := range spec.Devices.Requests {
		// Paths are built only for a use: most requests use no gated
		// field, and this runs on every claim create.
		r, rp := &spec.Devices.Requests[i], func() *field.Path { return dp.Child("requests").Index(i) }
		if e := r.Exactly; e != nil && (e.AdminAccess != nil || len(e.Tolerations) > 0 || e.Capacity != nil || len(e.DerivedAttributes) > 0) {
			ep := rp().Child("exactly")
			if e.AdminAccess != nil {
				u.add(V1FeatureAdminAccess, ep.Child("adminAccess"))
			}
			tolerationFeatures(&u, e.Tolerations, ep.Child("tolerations"))
			if e.Capacity != nil {
				u.add(V1FeatureConsumableCapacity, ep.Child("capacity"))
			}
			if len(e.DerivedAttributes) > 0 {
				u.add(V1FeatureDerivedAttributes, ep.Child("derivedAttributes"))
			}
		}
		if len(r.FirstAvailable) > 0 {
			u.add(V1FeaturePrioritizedList, rp().Child("firstAvailable"))
		}
		for j := range r.FirstAvailable {
			s, sp := &r.FirstAvailable[j], rp().Child("firstAvailable").Index(j)
			tolerationFeatures(&u, s.Tolerations, sp.Child("tolerations"))
			if s.Capacity != nil {
				u.add(V1FeatureConsumableCapacity, sp.Child("capacity"))
			}
			if len(s.DerivedAttributes) > 0 {
				u.add(V1FeatureDerivedAttributes, sp.Child("derivedAttributes"))
			}
		}
	}
	for i, c := range spec.Devices.Constraints {
		if c.DistinctAttribute != nil {
			u.add(V1FeatureDistinctAttribute, dp.Child("constraints").Index(i).Child("distinctAttribute"))
		}
	}
	return u
}

// claimStatusFeatures lists the gated fields of a claim status.
func claimStatusFeatures(st *resourcev1.ResourceClaimStatus, path *field.Path) featureUses {
	var u featureUses
	if a := st.Allocation; a != nil {
		for i := range a.Devices.Results {
			r := &a.Devices.Results[i]
			// Most results use no gated field: their paths are built only
			// for a use (this runs twice on every binding).
			if r.AdminAccess == nil && len(r.Tolerations) == 0 && len(r.BindingConditions) == 0 && len(r.BindingFailureConditions) == 0 &&
				r.ShareID == nil && len(r.ConsumedCapacity) == 0 && len(r.SkipNodeOperations) == 0 {
				continue
			}
			p := path.Child("allocation", "devices", "results").Index(i)
			if r.AdminAccess != nil {
				u.add(V1FeatureAdminAccess, p.Child("adminAccess"))
			}
			tolerationFeatures(&u, r.Tolerations, p.Child("tolerations"))
			if len(r.BindingConditions) > 0 {
				u.add(V1FeatureBindingConditions, p.Child("bindingConditions"))
			}
			if len(r.BindingFailureConditions) > 0 {
				u.add(V1FeatureBindingConditions, p.Child("bindingFailureConditions"))
			}
			if r.ShareID != nil {
				u.add(V1FeatureConsumableCapacity, p.Child("shareID"))
			}
			if len(r.ConsumedCapacity) > 0 {
				u.add(V1FeatureConsumableCapacity, p.Child("consumedCapacity"))
			}
			if len(r.SkipNodeOperations) > 0 {
				u.add(V1FeatureOptionalNodeOperations, p.Child("skipNodeOperations"))
			}
		}
	}
	if len(st.Devices) > 0 {
		u.add(V1FeatureDeviceStatus, path.Child("devices"))
	}
	for i, d := range st.Devices {
		if d.ShareID != nil {
			u.add(V1FeatureConsumableCapacity, path.Child("devices").Index(i).Child("shareID"))
		}
	}
	return u
}

// classFeatures lists the gated fields of a DeviceClass spec.
func classFeatures(spec *resourcev1.DeviceClassSpec, path *field.Path) featureUses {
	var u featureUses
	if spec.ExtendedResourceName != nil {
		u.add(V1FeatureExtendedResource, path.Child("extendedResourceName"))
	}
	return u
}

// taintRuleFeatures lists the gated fields of a DeviceTaintRule spec; the
// kind itself is one.
func taintRuleFeatures(spec *resourcev1.DeviceTaintRuleSpec, path *field.Path) featureUses {
	u := featureUses{{V1FeatureDeviceTaintRules, path}}
	if spec.Taint.Effect == resourcev1.DeviceTaintEffectNoExecute {
		u.add(V1FeatureDeviceTaintNoExecute, path.Child("taint", "effect"))
	}
	return u
}
