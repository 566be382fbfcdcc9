package validation

import (
	"fmt"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/validate/content"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of a NodeResourceSlice's instance tree. The server bounds the
// object's size as a whole.
const (
	// SliceMaxDepth is how deep instances may nest: a root instance is at
	// depth 1, an instance in one of its partitions at depth 2.
	SliceMaxDepth = 8
	// SliceMaxInstances is the number of instances in one slice, counting
	// those inside partitions.
	SliceMaxInstances = 4096
	// attributeIdentifierMaxLength bounds attribute names that are C
	// identifiers rather than DNS subdomains.
	attributeIdentifierMaxLength = 63
)

var (
	instanceHealths = []resourcev1alpha2.InstanceHealth{"", resourcev1alpha2.InstanceHealthy, resourcev1alpha2.InstanceUnhealthy}
	sliceModels     = []string{"partitionable"}
)

// ValidateNodeResourceSlice checks a slice: node and driver, exactly one
// model, and in the partitionable model valid, unique names (attribute
// names outside the domain Kubernetes reserves), references to existing
// attribute groups, one value per attribute and a bounded tree.
func ValidateNodeResourceSlice(s *resourcev1alpha2.NodeResourceSlice) field.ErrorList {
	errs := validateObjectMeta(&s.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateSliceSpec(&s.Spec, field.NewPath("spec"), nil)...)
}

// ValidateNodeResourceSliceUpdate checks a write to a slice; its node and
// driver may not change. A reserved attribute name the stored slice
// already publishes (stored before the rule) is tolerated, so that the
// slice stays writable; a new one is refused.
func ValidateNodeResourceSliceUpdate(newS, oldS *resourcev1alpha2.NodeResourceSlice) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, validateSliceSpec(&newS.Spec, p, reservedAttributeNames(&oldS.Spec))...)
	errs = append(errs, immutable(newS.Spec.NodeName, oldS.Spec.NodeName, p.Child("nodeName"))...)
	return append(errs, immutable(newS.Spec.DriverName, oldS.Spec.DriverName, p.Child("driverName"))...)
}

// validateSliceSpec checks a slice's spec; tolerate holds the reserved
// attribute names not to refuse.
func validateSliceSpec(spec *resourcev1alpha2.NodeResourceSliceSpec, path *field.Path, tolerate map[string]bool) field.ErrorList {
	errs := required(path.Child("nodeName"), spec.NodeName, dnsSubdomain)
	errs = append(errs, required(path.Child("driverName"), spec.DriverName, dnsSubdomain)...)
	var set []string
	if spec.Partitionable != nil {
		set = append(set, "partitionable")
	}
	errs = append(errs, oneOf(path, sliceModels, set)...)
	if spec.Partitionable != nil {
		errs = append(errs, validatePartitionable(spec.Partitionable, path.Child("partitionable"), tolerate)...)
	}
	return errs
}

// sliceWalker walks the instance tree once, collecting errors.
type sliceWalker struct {
	groups    map[string]bool
	tolerate  map[string]bool // reserved attribute names not refused
	groupPath string
	count     int
	errs      field.ErrorList
}

func validatePartitionable(p *resourcev1alpha2.PartitionableResources, path *field.Path, tolerate map[string]bool) field.ErrorList {
	gp := path.Child("commonAttributes")
	w := &sliceWalker{groups: map[string]bool{}, groupPath: gp.String(), tolerate: tolerate}
	if errs := maxItems(gp, len(p.CommonAttributes), resourcev1alpha2.CommonAttributesMaxSize); len(errs) > 0 {
		return errs
	}
	var names unique
	for i, g := range p.CommonAttributes {
		ip := gp.Index(i)
		w.errs = append(w.errs, required(ip.Child("name"), g.Name, dnsSubdomain)...)
		if g.Name != "" {
			w.errs = append(w.errs, names.check(g.Name, ip.Child("name"))...)
			w.groups[g.Name] = true
		}
		w.errs = append(w.errs, validateAttributes(g.Attributes, ip.Child("attributes"), w.tolerate)...)
	}
	w.instances(p.ResourceInstances, path.Child("resourceInstances"), 1)
	return w.errs
}

// instances checks one list of sibling instances at the given depth. It
// returns false once the slice holds too many instances, to stop the walk.
func (w *sliceWalker) instances(list []resourcev1alpha2.ResourceInstance, path *field.Path, depth int) bool {
	var names unique
	for i := range list {
		inst, p := &list[i], path.Index(i)
		w.count++
		if w.count > SliceMaxInstances {
			w.errs = append(w.errs, field.Forbidden(p, fmt.Sprintf("a slice may hold at most %d instances, counting those inside partitions", SliceMaxInstances)))
			return false
		}
		w.errs = append(w.errs, required(p.Child("name"), inst.Name, dnsSubdomain)...)
		if inst.Name != "" {
			w.errs = append(w.errs, names.check(inst.Name, p.Child("name"))...)
		}
		w.refs(inst.CommonAttributesRefs, p.Child("commonAttributesRefs"))
		w.errs = append(w.errs, validateAttributes(inst.Attributes, p.Child("attributes"), w.tolerate)...)
		w.errs = append(w.errs, supported(p.Child("health"), inst.Health, instanceHealths...)...)
		if !w.partitions(inst.Partitions, p.Child("partitions"), depth) {
			return false
		}
	}
	return true
}

func (w *sliceWalker) partitions(groups []resourcev1alpha2.ResourceInstanceGroup, path *field.Path, depth int) bool {
	if len(groups) > 0 && depth >= SliceMaxDepth {
		w.errs = append(w.errs, field.Forbidden(path, fmt.Sprintf("instances may be nested at most %d levels deep", SliceMaxDepth)))
		return true
	}
	if errs := maxItems(path, len(groups), resourcev1alpha2.PartitionsMaxSize); len(errs) > 0 {
		w.errs = append(w.errs, errs...)
		return false
	}
	var names unique
	for i := range groups {
		g, p := &groups[i], path.Index(i)
		w.errs = append(w.errs, required(p.Child("name"), g.Name, dnsSubdomain)...)
		if g.Name != "" {
			w.errs = append(w.errs, names.check(g.Name, p.Child("name"))...)
		}
		w.refs(g.CommonAttributesRefs, p.Child("commonAttributesRefs"))
		if !w.instances(g.ResourceInstances, p.Child("resourceInstances"), depth+1) {
			return false
		}
	}
	return true
}

// refs checks that every reference names a common attribute group.
func (w *sliceWalker) refs(refs []string, path *field.Path) {
	if errs := maxItems(path, len(refs), resourcev1alpha2.CommonAttributesRefsMaxSize); len(errs) > 0 {
		w.errs = append(w.errs, errs...)
		return
	}
	var seen unique
	for i, r := range refs {
		w.errs = append(w.errs, seen.check(r, path.Index(i))...)
		if !w.groups[r] {
			w.errs = append(w.errs, field.Invalid(path.Index(i), r, "must be the name of an entry in "+w.groupPath))
		}
	}
}

var attributeValueFields = []string{"quantity", "bool", "int", "intSlice", "string", "stringSlice", "version"}

// validateAttributes checks a list of attributes: unique valid names
// outside the reserved domain (except those in tolerate) and exactly one
// value each.
func validateAttributes(attrs []resourcev1alpha2.Attribute, path *field.Path, tolerate map[string]bool) field.ErrorList {
	if errs := maxItems(path, len(attrs), resourcev1alpha2.AttributesMaxSize); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	var names unique
	for i := range attrs {
		a, p := &attrs[i], path.Index(i)
		errs = append(errs, validateAttributeName(a.Name, p.Child("name"))...)
		if isReservedAttributeName(a.Name) && !tolerate[a.Name] {
			errs = append(errs, field.Invalid(p.Child("name"), a.Name, reservedAttributeReason))
		}
		if a.Name != "" {
			errs = append(errs, names.check(a.Name, p.Child("name"))...)
		}
		errs = append(errs, validateAttributeValue(&a.AttributeValue, p)...)
	}
	return errs
}

// reservedAttributeDomain is the domain whose attribute names seed 002
// reserves: "Resource names with ".k8s.io" as a suffix are reserved for
// future use and standardization by Kubernetes." allot refuses them in a
// NodeResourceSlice, and the domain itself as well. allot defines no
// standard attributes of its own.
const reservedAttributeDomain = "k8s.io"

const reservedAttributeReason = "attribute names ending in ." + reservedAttributeDomain +
	" are reserved for standardization by Kubernetes; name the attribute in your driver's own domain (such as `topology.example.com`) or as a C identifier"

// isReservedAttributeName reports whether a NodeResourceSlice attribute
// name is in the domain Kubernetes reserves: "k8s.io" or a subdomain of
// it ("topology.k8s.io"), not a name that merely ends in the same letters
// ("myk8s.io").
func isReservedAttributeName(name string) bool {
	return name == reservedAttributeDomain || strings.HasSuffix(name, "."+reservedAttributeDomain)
}

// reservedAttributeNames returns the reserved attribute names a slice
// publishes anywhere (attribute groups and the instance tree), nil when
// none.
func reservedAttributeNames(spec *resourcev1alpha2.NodeResourceSliceSpec) map[string]bool {
	p := spec.Partitionable
	if p == nil {
		return nil
	}
	var names map[string]bool
	add := func(attrs []resourcev1alpha2.Attribute) {
		for _, a := range attrs {
			if isReservedAttributeName(a.Name) {
				if names == nil {
					names = map[string]bool{}
				}
				names[a.Name] = true
			}
		}
	}
	for _, g := range p.CommonAttributes {
		add(g.Attributes)
	}
	stack := [][]resourcev1alpha2.ResourceInstance{p.ResourceInstances}
	for len(stack) > 0 {
		list := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for i := range list {
			add(list[i].Attributes)
			for _, g := range list[i].Partitions {
				stack = append(stack, g.ResourceInstances)
			}
		}
	}
	return names
}

// validateAttributeName accepts a C identifier (UUID, driverVersion) or a
// DNS subdomain (memory, example.com.model).
func validateAttributeName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if len(content.IsCIdentifier(name)) == 0 && len(name) <= attributeIdentifierMaxLength {
		return nil
	}
	if len(utilvalidation.IsDNS1123Subdomain(name)) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("must be a C identifier of at most %d characters (letters, digits and '_', not starting with a digit, such as `driverVersion`) or a lowercase DNS subdomain (such as `memory.example.com`)", attributeIdentifierMaxLength))}
}

func validateAttributeValue(v *resourcev1alpha2.AttributeValue, path *field.Path) field.ErrorList {
	present := []bool{v.Quantity != nil, v.Bool != nil, v.Int != nil, v.IntSlice != nil, v.String != nil, v.StringSlice != nil, v.Version != nil}
	var set []string
	for i, ok := range present {
		if ok {
			set = append(set, attributeValueFields[i])
		}
	}
	if errs := oneOf(path, attributeValueFields, set); len(errs) > 0 {
		return errs
	}
	if v.IntSlice != nil {
		if errs := maxItems(path.Child("intSlice"), len(*v.IntSlice), resourcev1alpha2.AttributeSliceMaxSize); len(errs) > 0 {
			return errs
		}
	}
	if v.StringSlice != nil {
		if errs := maxItems(path.Child("stringSlice"), len(*v.StringSlice), resourcev1alpha2.AttributeSliceMaxSize); len(errs) > 0 {
			return errs
		}
	}
	if v.Quantity != nil {
		abs := v.Quantity.DeepCopy()
		if abs.Sign() < 0 {
			abs.Neg()
		}
		if abs.Cmp(corev1.MaxQuantity) > 0 {
			return field.ErrorList{field.Invalid(path.Child("quantity"), v.Quantity.String(), "must be between -9223372036854775807 and 9223372036854775807 (2^63-1): amounts are counted in a 64-bit integer")}
		}
	}
	if v.Version != nil {
		if _, err := semver.ParseTolerant(*v.Version); err != nil {
			return field.ErrorList{field.Invalid(path.Child("version"), *v.Version, "must be a semantic version such as 1.2.3 (a leading 'v' and a missing patch are accepted): "+strings.TrimSpace(err.Error()))}
		}
	}
	return nil
}
