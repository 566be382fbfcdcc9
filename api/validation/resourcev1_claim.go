package validation

import (
	"context"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var deviceRequestTypes = []string{"exactly", "firstAvailable"}

// ValidateResourceClaimV1 checks a resource.k8s.io/v1 ResourceClaim being
// created. Its status is not looked at: the server drops it on create.
// Like every claim check it judges the claim as Default would leave it, so
// that a field Default fills may be left empty.
func ValidateResourceClaimV1(c *resourcev1.ResourceClaim) field.ErrorList {
	c = defaultedClaimV1(c)
	errs := validateObjectMeta(&c.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateClaimSpecV1(&c.Spec, field.NewPath("spec"))...)
}

// ValidateResourceClaimV1Update checks a write to a claim: "The spec is
// immutable."
func ValidateResourceClaimV1Update(newC, oldC *resourcev1.ResourceClaim) field.ErrorList {
	newC, oldC = defaultedClaimV1(newC), defaultedClaimV1(oldC)
	errs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, immutable(newC.Spec, oldC.Spec, field.NewPath("spec"))...)
}

// ValidateResourceClaimTemplateV1 checks a ResourceClaimTemplate being
// created: spec.metadata may only hold labels and annotations, and
// spec.spec is checked as a claim's spec.
func ValidateResourceClaimTemplateV1(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	t = defaultedTemplateV1(t)
	errs := validateObjectMeta(&t.ObjectMeta, nameIsDNSSubdomain, metaPath)
	p := field.NewPath("spec")
	errs = append(errs, validateTemplateObjectMeta(&t.Spec.ObjectMeta, nil, p.Child("metadata"))...)
	errs = append(errs, resourcev1.Validate_ResourceClaimTemplateSpec(context.Background(), v1Op(false), p, &t.Spec, nil)...)
	return append(errs, validateDeviceClaimV1(&t.Spec.Spec.Devices, p.Child("spec", "devices"), claimSpecFeatures(&t.Spec.Spec, p.Child("spec")))...)
}

// ValidateResourceClaimTemplateV1Update checks a write to a template: its
// spec "is immutable".
func ValidateResourceClaimTemplateV1Update(newT, oldT *resourcev1.ResourceClaimTemplate) field.ErrorList {
	newT, oldT = defaultedTemplateV1(newT), defaultedTemplateV1(oldT)
	errs := validateObjectMetaUpdate(&newT.ObjectMeta, &oldT.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, immutable(newT.Spec, oldT.Spec, field.NewPath("spec"))...)
}

func validateClaimSpecV1(spec *resourcev1.ResourceClaimSpec, path *field.Path) field.ErrorList {
	errs := resourcev1.Validate_ResourceClaimSpec(context.Background(), v1Op(false), path, spec, nil)
	return append(errs, validateDeviceClaimV1(&spec.Devices, path.Child("devices"), claimSpecFeatures(spec, path))...)
}

// requestNamesV1 maps each request of a claim to its subrequests (nil for
// an `exactly` request).
type requestNamesV1 map[string]map[string]bool

func gatherRequestNamesV1(dc *resourcev1.DeviceClaim) requestNamesV1 {
	names := requestNamesV1{}
	for _, r := range dc.Requests {
		var subs map[string]bool
		if len(r.FirstAvailable) > 0 {
			subs = map[string]bool{}
			for _, s := range r.FirstAvailable {
				subs[s.Name] = true
			}
		}
		names[r.Name] = subs
	}
	return names
}

// has reports whether ref is "<request>" or "<request>/<subrequest>" of
// the claim.
func (n requestNamesV1) has(ref string) bool {
	req, sub, isSub := strings.Cut(ref, "/")
	subs, ok := n[req]
	if !ok || !isSub {
		return ok
	}
	return subs[sub]
}

// validateRefs checks references to requests in constraints and configs:
// "References to subrequests must include the name of the main request and
// may include the subrequest using the format <main request>[/<subrequest>]."
// Size and uniqueness: generated validation.
func (n requestNamesV1) validateRefs(refs []string, path *field.Path) field.ErrorList {
	if len(refs) > resourcev1.DeviceRequestsMaxSize {
		return nil
	}
	var errs field.ErrorList
	for i, ref := range refs {
		if !n.has(ref) {
			errs = append(errs, field.Invalid(path.Index(i), ref, "must be the name of a request of the claim, or of a request and one of its `firstAvailable` subrequests as <request>/<subrequest>"))
		}
	}
	return errs
}

// validateDeviceClaimV1 checks requests, constraints and configuration of
// a claim (or template) being created. At most 32 requests, constraints
// and configs, unique request names: generated validation.
func validateDeviceClaimV1(dc *resourcev1.DeviceClaim, path *field.Path, uses featureUses) field.ErrorList {
	var errs field.ErrorList
	names := gatherRequestNamesV1(dc)
	compile := currentDeviceCompiler()
	if len(dc.Requests) <= resourcev1.DeviceRequestsMaxSize {
		for i := range dc.Requests {
			errs = append(errs, validateDeviceRequestV1(&dc.Requests[i], path.Child("requests").Index(i), compile)...)
		}
	}
	if len(dc.Constraints) <= resourcev1.DeviceConstraintsMaxSize {
		for i := range dc.Constraints {
			errs = append(errs, validateConstraintV1(&dc.Constraints[i], names, path.Child("constraints").Index(i))...)
		}
	}
	if len(dc.Config) <= resourcev1.DeviceConfigMaxSize {
		for i := range dc.Config {
			c, p := &dc.Config[i], path.Child("config").Index(i)
			errs = append(errs, names.validateRefs(c.Requests, p.Child("requests"))...)
			errs = append(errs, validateDeviceConfigurationV1(&c.DeviceConfiguration, p, false)...)
		}
	}
	errs = append(errs, validateDerivedAttributeUse(dc, path)...)
	return append(errs, uses.refuse(nil)...)
}

// validateDeviceRequestV1: the name "Must be a DNS label."; "One of Exactly
// or FirstAvailable must be set."
func validateDeviceRequestV1(r *resourcev1.DeviceRequest, path *field.Path, compile SelectorCompiler) field.ErrorList {
	errs := required(path.Child("name"), r.Name, dnsLabel)
	var set []string
	if r.Exactly != nil {
		set = append(set, "exactly")
	}
	if len(r.FirstAvailable) > 0 {
		set = append(set, "firstAvailable")
	}
	errs = append(errs, oneOf(path, deviceRequestTypes, set)...)
	if e := r.Exactly; e != nil {
		ep := path.Child("exactly")
		// "A DeviceClassName is required." It names a DeviceClass, whose
		// names are DNS subdomains. (For subrequests the generated
		// validation checks this.)
		errs = append(errs, required(ep.Child("deviceClassName"), e.DeviceClassName, dnsSubdomain)...)
		errs = append(errs, validateRequestCommonV1(e.Selectors, e.AllocationMode, e.Count, e.Tolerations, e.Capacity, e.DerivedAttributes, ep, compile)...)
	}
	if len(r.FirstAvailable) > resourcev1.FirstAvailableDeviceRequestMaxSize {
		return errs
	}
	for i := range r.FirstAvailable {
		s, sp := &r.FirstAvailable[i], path.Child("firstAvailable").Index(i)
		errs = append(errs, required(sp.Child("name"), s.Name, dnsLabel)...)
		errs = append(errs, validateRequestCommonV1(s.Selectors, s.AllocationMode, s.Count, s.Tolerations, s.Capacity, s.DerivedAttributes, sp, compile)...)
	}
	return errs
}

// validateRequestCommonV1 checks what an exact request and a subrequest
// share.
func validateRequestCommonV1(sels []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64,
	tols []resourcev1.DeviceToleration, capacity *resourcev1.CapacityRequirements, derived []resourcev1.DeviceDerivedAttribute,
	path *field.Path, compile SelectorCompiler,
) field.ErrorList {
	var errs field.ErrorList
	if len(sels) <= resourcev1.DeviceSelectorsMaxSize {
		for i, s := range sels {
			p := path.Child("selectors").Index(i)
			if s.CEL == nil {
				errs = append(errs, field.Required(p.Child("cel"), "a selector must have `cel` set"))
				continue
			}
			errs = append(errs, validateCELV1(s.CEL.Expression, p.Child("cel", "expression"), compile)...)
		}
	}
	errs = append(errs, validateAllocationModeV1(mode, count, path)...)
	if len(tols) > 0 {
		errs = append(errs, validateTolerationsV1(tols, path.Child("tolerations"))...)
	}
	if capacity != nil {
		cp := path.Child("capacity", "requests")
		for _, k := range sortedKeys(capacity.Requests) {
			p := keyPath(cp, string(k))
			errs = append(errs, validateQualifiedNameV1(string(k), p)...)
			errs = append(errs, nonNegativeQuantity(p, capacity.Requests[k])...)
		}
	}
	// Derived attributes (DRADerivedAttributes): names are unique within
	// the request, expressions at most 10 Ki. Their names and non-empty
	// expressions: generated validation; "must be referenced by at least
	// one [...] constraint": validateDerivedAttributeUse.
	if len(derived) <= resourcev1.DeviceDerivedAttributesMaxSize {
		var names unique
		for i, d := range derived {
			p := path.Child("derivedAttributes").Index(i)
			if d.Name != "" {
				errs = append(errs, names.check(string(d.Name), p.Child("name"))...)
			}
			errs = append(errs, maxLen(p.Child("expression"), d.Expression, resourcev1.CELSelectorExpressionMaxLength)...)
		}
	}
	return errs
}

// validateAllocationModeV1: "Count is used only when the count mode is
// "ExactCount". Must be greater than zero." And at most
// AllocationResultsMaxSize (32): Kubernetes' validation stops at zero, but
// its allocator refuses any claim asking for more devices than an
// allocation holds, so a larger count could never be allocated; allot
// refuses it when written, so that quota (which counts count devices per
// class) never adds numbers near int64's end. With mode All, count stays
// unset. The mode's values: generated validation. Default sets an empty
// mode to ExactCount and a zero count of ExactCount to one, and claims are
// judged defaulted.
func validateAllocationModeV1(mode resourcev1.DeviceAllocationMode, count int64, path *field.Path) field.ErrorList {
	cp := func() *field.Path { return path.Child("count") }
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(cp(), count, "must not be set when `allocationMode` is 'All'")}
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(cp(), count, "must be greater than zero")}
		}
		if count > resourcev1.AllocationResultsMaxSize {
			return field.ErrorList{field.Invalid(cp(), count, fmt.Sprintf("must be at most %d: no allocation holds more devices (AllocationResultsMaxSize)", resourcev1.AllocationResultsMaxSize))}
		}
	}
	return nil
}

// validateConstraintV1: "DeviceConstraint must have exactly one field set
// besides Requests" (matchAttribute or distinctAttribute, whose format the
// generated validation checks); requests name requests of the claim.
func validateConstraintV1(c *resourcev1.DeviceConstraint, names requestNamesV1, path *field.Path) field.ErrorList {
	errs := names.validateRefs(c.Requests, path.Child("requests"))
	var set []string
	if c.MatchAttribute != nil {
		set = append(set, "matchAttribute")
		errs = append(errs, oneSlash(string(*c.MatchAttribute), path.Child("matchAttribute"))...)
	}
	if c.DistinctAttribute != nil {
		set = append(set, "distinctAttribute")
		errs = append(errs, oneSlash(string(*c.DistinctAttribute), path.Child("distinctAttribute"))...)
	}
	return append(errs, oneOf(path, []string{"matchAttribute", "distinctAttribute"}, set)...)
}

// oneSlash refuses a fully qualified name with more than one '/', which
// upstream's format check lets through.
func oneSlash(name string, path *field.Path) field.ErrorList {
	if strings.Count(name, "/") > 1 {
		return field.ErrorList{field.Invalid(path, name, "must not contain more than one '/'")}
	}
	return nil
}

// validateDerivedAttributeUse: "Every derived attribute defined in this
// list must be referenced by at least one MatchAttribute or
// DistinctAttribute constraint in the `.devices.constraints` list." A
// constraint without requests applies to all requests; one naming a
// request applies to its subrequests.
func validateDerivedAttributeUse(dc *resourcev1.DeviceClaim, path *field.Path) field.ErrorList {
	if len(dc.Requests) > resourcev1.DeviceRequestsMaxSize {
		return nil
	}
	used := func(attr, req, sub string) bool {
		for _, c := range dc.Constraints {
			var name resourcev1.FullyQualifiedName
			switch {
			case c.MatchAttribute != nil:
				name = *c.MatchAttribute
			case c.DistinctAttribute != nil:
				name = *c.DistinctAttribute
			}
			if string(name) != attr {
				continue
			}
			if len(c.Requests) == 0 {
				return true
			}
			for _, ref := range c.Requests {
				if ref == req || (sub != "" && ref == req+"/"+sub) {
					return true
				}
			}
		}
		return false
	}
	var errs field.ErrorList
	check := func(derived []resourcev1.DeviceDerivedAttribute, req, sub string, p *field.Path) {
		if len(derived) > resourcev1.DeviceDerivedAttributesMaxSize {
			return
		}
		for i, d := range derived {
			if d.Name != "" && !used(string(d.Name), req, sub) {
				errs = append(errs, field.Invalid(p.Index(i).Child("name"), string(d.Name), "must be referenced by a `matchAttribute` or `distinctAttribute` constraint that applies to this request"))
			}
		}
	}
	// Paths only for requests that derive attributes (few do).
	for i, r := range dc.Requests {
		if r.Exactly != nil && len(r.Exactly.DerivedAttributes) > 0 {
			check(r.Exactly.DerivedAttributes, r.Name, "", path.Child("requests").Index(i).Child("exactly", "derivedAttributes"))
		}
		if len(r.FirstAvailable) > resourcev1.FirstAvailableDeviceRequestMaxSize {
			continue
		}
		for j, s := range r.FirstAvailable {
			if len(s.DerivedAttributes) > 0 {
				check(s.DerivedAttributes, r.Name, s.Name, path.Child("requests").Index(i).Child("firstAvailable").Index(j).Child("derivedAttributes"))
			}
		}
	}
	return errs
}

// Defaults.

// DefaultResourceClaimV1 applies upstream's defaults to a claim: in each
// exact request and subrequest an empty allocationMode becomes ExactCount
// and a zero count of ExactCount becomes 1 ("If AllocationMode is not
// specified, the default mode is ExactCount. If the mode is ExactCount and
// count is not specified, the default count is one."); every toleration,
// in the spec and in the allocation, gets operator Equal when it has none
// (+default="Equal").
func DefaultResourceClaimV1(c *resourcev1.ResourceClaim) {
	defaultDeviceClaimV1(&c.Spec.Devices)
	if a := c.Status.Allocation; a != nil {
		for i := range a.Devices.Results {
			defaultTolerationsV1(a.Devices.Results[i].Tolerations)
		}
	}
}

// DefaultResourceClaimTemplateV1 applies the claim defaults to the spec of
// a template.
func DefaultResourceClaimTemplateV1(t *resourcev1.ResourceClaimTemplate) {
	defaultDeviceClaimV1(&t.Spec.Spec.Devices)
}

func defaultDeviceClaimV1(dc *resourcev1.DeviceClaim) {
	for i := range dc.Requests {
		r := &dc.Requests[i]
		if e := r.Exactly; e != nil {
			defaultAllocationModeV1(&e.AllocationMode, &e.Count)
			defaultTolerationsV1(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			defaultAllocationModeV1(&s.AllocationMode, &s.Count)
			defaultTolerationsV1(s.Tolerations)
		}
	}
}

func defaultAllocationModeV1(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultTolerationsV1(tols []resourcev1.DeviceToleration) {
	for i := range tols {
		if tols[i].Operator == "" {
			tols[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}

// defaultedClaimV1 returns c as Default leaves it, so that validation
// judges a claim as it will be stored without changing its input: c
// itself when Default would change nothing (a claim as stored, every
// status write's old one), else a defaulted copy. Validation only reads
// what it is given.
func defaultedClaimV1(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
	if claimDefaultedV1(c) {
		return c
	}
	d := c.DeepCopy()
	DefaultResourceClaimV1(d)
	return d
}

// claimDefaultedV1 reports whether DefaultResourceClaimV1 would leave c
// as it is.
func claimDefaultedV1(c *resourcev1.ResourceClaim) bool {
	modeSet := func(mode resourcev1.DeviceAllocationMode, count int64) bool {
		return mode != "" && (mode != resourcev1.DeviceAllocationModeExactCount || count != 0)
	}
	tolsSet := func(tols []resourcev1.DeviceToleration) bool {
		for i := range tols {
			if tols[i].Operator == "" {
				return false
			}
		}
		return true
	}
	for i := range c.Spec.Devices.Requests {
		r := &c.Spec.Devices.Requests[i]
		if e := r.Exactly; e != nil && !(modeSet(e.AllocationMode, e.Count) && tolsSet(e.Tolerations)) {
			return false
		}
		for j := range r.FirstAvailable {
			if s := &r.FirstAvailable[j]; !(modeSet(s.AllocationMode, s.Count) && tolsSet(s.Tolerations)) {
				return false
			}
		}
	}
	if a := c.Status.Allocation; a != nil {
		for i := range a.Devices.Results {
			if !tolsSet(a.Devices.Results[i].Tolerations) {
				return false
			}
		}
	}
	return true
}

func defaultedTemplateV1(t *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaimTemplate {
	d := t.DeepCopy()
	DefaultResourceClaimTemplateV1(d)
	return d
}
