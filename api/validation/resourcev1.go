package validation

// Validation of the upstream resource.k8s.io/v1 kinds (DeviceClass,
// ResourceSlice, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate),
// using the Go types of k8s.io/api/resource/v1.
//
// Every check runs in two layers. Upstream's generated declarative
// validations (Validate_* in k8s.io/api/resource/v1) check what the types'
// +k8s: tags say: most list sizes, list uniqueness by key, enums, unions of
// attribute values and a few formats. The hand-written code here checks the
// rest of what the field comments of types.go state. Gated fields go
// through the table in resourcev1_features.go.
//
// Files: this one holds the exported entry points of DeviceClass and
// DeviceTaintRule and the helpers shared by all kinds;
// resourcev1_slice.go, resourcev1_claim.go and resourcev1_status.go hold
// the other kinds.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"allot.dev/allot/api/resource/resourceconv"
)

var deviceCompiler atomic.Pointer[SelectorCompiler]

// SetDeviceSelectorCompiler sets the compiler of the CEL selectors of
// resource.k8s.io/v1 (`device.attributes["dra.example.com"].model == ...`)
// in DeviceClass spec.selectors and in claim requests (exactly and
// firstAvailable). Nil removes it; then an expression is only checked to be
// non-empty and at most 10 KiB. The API server installs the allocator's
// compiler at startup. It is separate from SetSelectorCompiler, which
// compiles the selectors of the v1alpha2 parameter kinds.
func SetDeviceSelectorCompiler(c SelectorCompiler) {
	if c == nil {
		deviceCompiler.Store(nil)
		return
	}
	deviceCompiler.Store(&c)
}

func currentDeviceCompiler() SelectorCompiler {
	if c := deviceCompiler.Load(); c != nil {
		return *c
	}
	return nil
}

// v1Op is the operation given to upstream's generated validations. The
// only validation option they consult, DRAPartitionableDevicesType (for
// spec.partitionTypeAttribute), is set: whether the field is accepted is
// decided by V1Features, and the generated code then only checks its
// format instead of refusing it a second time.
//
// Both operations are built once and share one options map, which the
// generated code only reads (it was two allocations per call).
func v1Op(update bool) operation.Operation {
	if update {
		return v1UpdateOp
	}
	return v1CreateOp
}

var (
	v1Options  = map[string]bool{"DRAPartitionableDevicesType": true}
	v1CreateOp = operation.Operation{Type: operation.Create, Options: v1Options}
	v1UpdateOp = operation.Operation{Type: operation.Update, Options: v1Options}
)

// ValidateDeviceClass checks a DeviceClass being created: a DNS-subdomain
// name, selectors that compile, and opaque configurations.
func ValidateDeviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	errs := validateObjectMeta(&c.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateDeviceClassSpecV1(&c.Spec, nil, field.NewPath("spec"))...)
}

// ValidateDeviceClassUpdate checks a write to a DeviceClass. The spec is
// mutable; selectors and configurations that did not change are not
// compiled or measured again.
func ValidateDeviceClassUpdate(newC, oldC *resourcev1.DeviceClass) field.ErrorList {
	errs := validateObjectMetaUpdate(&newC.ObjectMeta, &oldC.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateDeviceClassSpecV1(&newC.Spec, &oldC.Spec, field.NewPath("spec"))...)
}

func validateDeviceClassSpecV1(spec, old *resourcev1.DeviceClassSpec, path *field.Path) field.ErrorList {
	errs := resourcev1.Validate_DeviceClassSpec(context.Background(), v1Op(old != nil), path, spec, old)
	// "Validation against this limit [...] happens only when setting an
	// expression for the first time or when changing it."
	// (CELSelectorExpressionMaxCost)
	storedSelectors := old != nil && equality.Semantic.DeepEqual(spec.Selectors, old.Selectors)
	errs = append(errs, validateSelectorsV1(spec.Selectors, path.Child("selectors"), storedSelectors)...)
	storedConfig := old != nil && equality.Semantic.DeepEqual(spec.Config, old.Config)
	if len(spec.Config) <= resourcev1.DeviceConfigMaxSize {
		for i := range spec.Config {
			errs = append(errs, validateDeviceConfigurationV1(&spec.Config[i].DeviceConfiguration, path.Child("config").Index(i), storedConfig)...)
		}
	}
	var oldUses featureUses
	if old != nil {
		oldUses = classFeatures(old, path)
	}
	return append(errs, classFeatures(spec, path).refuse(oldUses)...)
}

// ValidateDeviceTaintRule checks a DeviceTaintRule being created: a
// DNS-subdomain name, a valid selector and taint.
func ValidateDeviceTaintRule(r *resourcev1.DeviceTaintRule) field.ErrorList {
	errs := validateObjectMeta(&r.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateDeviceTaintRuleSpecV1(&r.Spec, nil, field.NewPath("spec"))...)
}

// ValidateDeviceTaintRuleUpdate checks a write to a DeviceTaintRule; its
// spec is mutable.
func ValidateDeviceTaintRuleUpdate(newR, oldR *resourcev1.DeviceTaintRule) field.ErrorList {
	errs := validateObjectMetaUpdate(&newR.ObjectMeta, &oldR.ObjectMeta, nameIsDNSSubdomain, metaPath)
	return append(errs, validateDeviceTaintRuleSpecV1(&newR.Spec, &oldR.Spec, field.NewPath("spec"))...)
}

// ValidateDeviceTaintRuleStatusUpdate checks a write to the status of a
// DeviceTaintRule: at most 8 valid conditions with unique types.
func ValidateDeviceTaintRuleStatusUpdate(newR, oldR *resourcev1.DeviceTaintRule) field.ErrorList {
	p := field.NewPath("status")
	errs := validateObjectMetaUpdate(&newR.ObjectMeta, &oldR.ObjectMeta, nameIsDNSSubdomain, metaPath)
	errs = append(errs, resourcev1.Validate_DeviceTaintRuleStatus(context.Background(), v1Op(true), p, &newR.Status, &oldR.Status)...)
	// "Must have 8 or fewer entries."
	return append(errs, validateConditionsV1(newR.Status.Conditions, resourcev1.DeviceTaintRuleStatusMaxConditions, p.Child("conditions"))...)
}

func validateDeviceTaintRuleSpecV1(spec, old *resourcev1.DeviceTaintRuleSpec, path *field.Path) field.ErrorList {
	errs := resourcev1.Validate_DeviceTaintRuleSpec(context.Background(), v1Op(old != nil), path, spec, old)
	if sel := spec.DeviceSelector; sel != nil {
		sp := path.Child("deviceSelector")
		if sel.Driver != nil {
			errs = append(errs, validateDriverNameV1(*sel.Driver, sp.Child("driver"))...)
		}
		if sel.Pool != nil {
			errs = append(errs, validatePoolNameV1(*sel.Pool, sp.Child("pool"))...)
		}
		if sel.Device != nil {
			errs = append(errs, required(sp.Child("device"), *sel.Device, dnsLabel)...)
		}
	}
	errs = append(errs, validateDeviceTaintV1(&spec.Taint, path.Child("taint"))...)
	var oldUses featureUses
	if old != nil {
		oldUses = taintRuleFeatures(old, path)
	}
	return append(errs, taintRuleFeatures(spec, path).refuse(oldUses)...)
}

// validateConditionsV1 checks conditions as Kubernetes does, leaving out
// what upstream's generated validations already report (a condition's
// required fields, its status enum, unique types).
func validateConditionsV1(conds []metav1.Condition, limit int, path *field.Path) field.ErrorList {
	if len(conds) > limit {
		return field.ErrorList{field.TooMany(path, len(conds), limit)}
	}
	return metav1validation.ValidateConditions(conds, path).RemoveCoveredByDeclarative()
}

// Names.

// validateDriverNameV1: "Must be a DNS subdomain and should end with a DNS
// domain owned by the vendor of the driver. It should use only lower case
// characters." At most DriverNameMaxLength (63) characters. As upstream
// (and its generated format k8s-long-name-caseless for the same field
// elsewhere), upper case is tolerated.
func validateDriverNameV1(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "a driver name (a DNS subdomain such as `gpu.example.com`) is required")}
	}
	if len(name) > resourcev1.DriverNameMaxLength {
		return field.ErrorList{field.TooLong(path, "", resourcev1.DriverNameMaxLength)}
	}
	return invalidAll(path, name, content.IsDNS1123SubdomainCaseless(name))
}

// validatePoolNameV1: "It must not be longer than 253 characters and must
// consist of one or more DNS sub-domains separated by slashes."
func validatePoolNameV1(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "a pool name (one or more DNS subdomains separated by '/') is required")}
	}
	return validate.ResourcePoolName(context.Background(), operation.Operation{}, path, &name, nil)
}

// validateQualifiedNameV1 checks the name of an attribute or capacity
// (QualifiedName): "either a C identifier (e.g. "theName") or a DNS
// subdomain followed by a slash ("/") followed by a C identifier [...]
// The maximum length for the DNS subdomain is 63 characters [...] and the
// maximum length of the C identifier is 32." A second slash is refused.
func validateQualifiedNameV1(name string, path *field.Path) field.ErrorList {
	domain, id, hasDomain := strings.Cut(name, "/")
	if !hasDomain {
		domain, id = "", name
	}
	var errs field.ErrorList
	if hasDomain {
		switch {
		case strings.Contains(id, "/"):
			return field.ErrorList{field.Invalid(path, name, "must not contain more than one '/'")}
		case domain == "":
			errs = append(errs, field.Invalid(path, name, "the domain before '/' must not be empty"))
		case len(domain) > resourcev1.DeviceMaxDomainLength:
			errs = append(errs, field.Invalid(path, name, fmt.Sprintf("the domain before '/' must be no more than %d characters", resourcev1.DeviceMaxDomainLength)))
		default:
			for _, msg := range content.IsDNS1123SubdomainCaseless(domain) {
				errs = append(errs, field.Invalid(path, name, "the domain before '/': "+msg))
			}
		}
	}
	switch {
	case id == "":
		errs = append(errs, field.Invalid(path, name, "the identifier must not be empty"))
	case len(id) > resourcev1.DeviceMaxIDLength:
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf("the identifier must be no more than %d characters", resourcev1.DeviceMaxIDLength)))
	default:
		for _, msg := range content.IsCIdentifier(id) {
			errs = append(errs, field.Invalid(path, name, msg))
		}
	}
	return errs
}

// keyPath is the path of a map entry, its key cut short when it is very
// long so that errors stay readable.
func keyPath(path *field.Path, key string) *field.Path {
	return path.Key(abbreviate(key, 2*(resourcev1.DeviceMaxDomainLength+resourcev1.DeviceMaxIDLength)))
}

// semverRE is the regular expression of semver.org 2.0.0 (without a
// leading "v").
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// validateVersionV1: "a semantic version according to semver.org spec
// 2.0.0. Must not be longer than 64 characters."
func validateVersionV1(v string, path *field.Path) field.ErrorList {
	if len(v) > resourcev1.DeviceAttributeMaxValueLength {
		return field.ErrorList{field.TooLong(path, "", resourcev1.DeviceAttributeMaxValueLength)}
	}
	if !semverRE.MatchString(v) {
		return field.ErrorList{field.Invalid(path, v, "must be a semantic version as defined by semver.org 2.0.0, such as 1.2.3 or 1.2.3-rc.1+build.5 (no leading 'v')")}
	}
	return nil
}

// Selectors and configuration.

// validateSelectorsV1 checks a list of device selectors. "DeviceSelector
// must have exactly one field set", which today is cel. stored skips the
// expressions: they were accepted when they were set. More selectors than
// allowed are reported by the generated validation only; none of them is
// compiled then.
func validateSelectorsV1(sels []resourcev1.DeviceSelector, path *field.Path, stored bool) field.ErrorList {
	if len(sels) > resourcev1.DeviceSelectorsMaxSize {
		return nil
	}
	compile := currentDeviceCompiler()
	var errs field.ErrorList
	for i, s := range sels {
		p := path.Index(i)
		if s.CEL == nil {
			errs = append(errs, field.Required(p.Child("cel"), "a selector must have `cel` set"))
			continue
		}
		if !stored {
			errs = append(errs, validateCELV1(s.CEL.Expression, p.Child("cel", "expression"), compile)...)
		}
	}
	return errs
}

// validateCELV1 checks a selector expression: set, at most
// CELSelectorExpressionMaxLength (10 Ki) long, and compiling when a
// compiler is installed.
func validateCELV1(expr string, path *field.Path, compile SelectorCompiler) field.ErrorList {
	if expr == "" {
		return field.ErrorList{field.Required(path, "a CEL expression over `device` (driver, attributes, capacity) is required")}
	}
	if len(expr) > resourcev1.CELSelectorExpressionMaxLength {
		return field.ErrorList{field.TooLong(path, "", resourcev1.CELSelectorExpressionMaxLength)}
	}
	return compileSelector(expr, compile, path)
}

// validateDeviceConfigurationV1: "DeviceConfiguration must have exactly
// one field set", today opaque. Its driver is checked by the generated
// validation.
func validateDeviceConfigurationV1(c *resourcev1.DeviceConfiguration, path *field.Path, stored bool) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(path.Child("opaque"), "a configuration must have `opaque` set")}
	}
	// "The length of the raw data must be smaller or equal to 10 Ki."
	// Stored parameters are not measured again: the limit may change.
	return validateJSONObjectV1(&c.Opaque.Parameters, path.Child("opaque", "parameters"), resourcev1.OpaqueParametersMaxLength, stored, true)
}

// validateJSONObjectV1 checks raw data: a JSON object of at most limit
// bytes. An empty value is an error when required.
func validateJSONObjectV1(raw *runtime.RawExtension, path *field.Path, limit int, stored, isRequired bool) field.ErrorList {
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		b, err := json.Marshal(raw.Object)
		if err != nil {
			return field.ErrorList{field.Invalid(path, omit, "cannot be encoded as JSON: "+err.Error())}
		}
		data = b
	}
	if len(data) == 0 {
		if isRequired {
			return field.ErrorList{field.Required(path, "a JSON object is required")}
		}
		return nil
	}
	if !stored && len(data) > limit {
		return field.ErrorList{field.TooLong(path, "", limit)}
	}
	if jsonObjectDecodes(data) {
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return field.ErrorList{field.Invalid(path, omit, "is not valid JSON: "+abbreviate(err.Error(), maxEchoedError))}
	}
	if _, ok := v.(map[string]any); !ok {
		return field.ErrorList{field.Invalid(path, omit, "must be a JSON object")}
	}
	return nil
}

// jsonObjectDecodes reports, without decoding, that json.Unmarshal of
// data into an any would give a map: data is valid JSON, an object, and
// none of its numbers can overflow a float64 (no digit followed by an
// exponent, no run of more than 300 digits), the one way the decode of
// valid JSON into an any fails. It errs on the side of false, for which
// validateJSONObjectV1 decodes as it always did; the decode was 15
// allocations for the parameters of a typical claim.
func jsonObjectDecodes(data []byte) bool {
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	if i == len(data) || data[i] != '{' {
		return false
	}
	digits := 0
	for _, c := range data[i:] {
		switch {
		case c >= '0' && c <= '9':
			if digits++; digits > 300 {
				return false
			}
		case (c == 'e' || c == 'E') && digits > 0:
			return false
		default:
			digits = 0
		}
	}
	return json.Valid(data)
}

// Taints and tolerations.

// validateDeviceTaintV1 checks what the generated validation does not: the
// key ("Must be a label name") and the value ("Must be a label value").
// The effect (required, an enum) is checked there.
func validateDeviceTaintV1(t *resourcev1.DeviceTaint, path *field.Path) field.ErrorList {
	errs := required(path.Child("key"), t.Key, qualifiedName)
	return append(errs, optional(path.Child("value"), t.Value, labelValue)...)
}

// validateDeviceTaintsV1: "The maximum number of taints is 16."
func validateDeviceTaintsV1(taints []resourcev1.DeviceTaint, path *field.Path) field.ErrorList {
	if len(taints) > resourcev1.DeviceTaintsMaxLength {
		return field.ErrorList{field.TooMany(path, len(taints), resourcev1.DeviceTaintsMaxLength)}
	}
	var errs field.ErrorList
	for i := range taints {
		errs = append(errs, validateDeviceTaintV1(&taints[i], path.Index(i))...)
	}
	return errs
}

// validateTolerationsV1: "The maximum number of tolerations is 16."; "If
// the key is empty, operator must be Exists"; "If the operator is Exists,
// the value must be empty, otherwise just a regular string. Must be a label
// value." Key format, operator and effect enums: generated validation.
func validateTolerationsV1(tols []resourcev1.DeviceToleration, path *field.Path) field.ErrorList {
	if len(tols) > resourcev1.DeviceTolerationsMaxLength {
		return field.ErrorList{field.TooMany(path, len(tols), resourcev1.DeviceTolerationsMaxLength)}
	}
	var errs field.ErrorList
	for i, t := range tols {
		p := path.Index(i)
		switch t.Operator {
		case resourcev1.DeviceTolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when `operator` is 'Exists'"))
			}
		case resourcev1.DeviceTolerationOpEqual:
			if t.Key == "" {
				errs = append(errs, field.Invalid(p.Child("operator"), string(t.Operator), "must be 'Exists' when `key` is empty, which means \"match all keys and values\""))
			}
			errs = append(errs, labelValue(p.Child("value"), t.Value)...)
		}
	}
	return errs
}

// Node selection.

// validateNodeSelectorV1 checks a node selector of the core/v1 type of
// k8s.io/api with the checks of allot's own node selectors. With oneTerm
// it must have exactly one term ("Must use exactly one term.").
func validateNodeSelectorV1(sel *k8scorev1.NodeSelector, path *field.Path, oneTerm bool) field.ErrorList {
	if sel == nil {
		return nil
	}
	s := resourceconv.NodeSelectorFromKube(sel)
	errs := validateNodeSelector(s, path)
	if oneTerm && len(sel.NodeSelectorTerms) > 1 {
		errs = append(errs, field.Invalid(path.Child("nodeSelectorTerms"), omit, fmt.Sprintf("must have exactly one node selector term, not %d", len(sel.NodeSelectorTerms))))
	}
	return errs
}

// Binding conditions.

// validateBindingConditionsV1: at most 4 of each ("The maximum number of
// binding conditions is 4", checked by the generated validation), each "a
// valid condition type string", no duplicates, no overlap between the two
// lists, and one list only together with the other (as upstream).
func validateBindingConditionsV1(conds, failures []string, path *field.Path) field.ErrorList {
	cp, fp := path.Child("bindingConditions"), path.Child("bindingFailureConditions")
	if len(conds) > resourcev1.BindingConditionsMaxSize || len(failures) > resourcev1.BindingFailureConditionsMaxSize {
		return nil
	}
	var errs field.ErrorList
	var seen, seenFailure unique
	inConds := map[string]bool{}
	for i, c := range conds {
		errs = append(errs, metav1validation.ValidateLabelName(c, cp.Index(i))...)
		errs = append(errs, seen.check(c, cp.Index(i))...)
		inConds[c] = true
	}
	for i, c := range failures {
		errs = append(errs, metav1validation.ValidateLabelName(c, fp.Index(i))...)
		errs = append(errs, seenFailure.check(c, fp.Index(i))...)
		if inConds[c] {
			errs = append(errs, field.Invalid(fp.Index(i), c, "must not also be listed in `bindingConditions`"))
		}
	}
	if len(conds) == 0 && len(failures) > 0 {
		errs = append(errs, field.Required(cp, "must be set when `bindingFailureConditions` is set"))
	}
	if len(failures) == 0 && len(conds) > 0 {
		errs = append(errs, field.Required(fp, "must be set when `bindingConditions` is set"))
	}
	return errs
}

// validateSkipNodeOperationsV1: "NodePrepareResources [...] cannot be
// specified unless NodeUnprepareResources is also listed (or "*" is
// specified)." Values and uniqueness: generated validation.
func validateSkipNodeOperationsV1(ops []resourcev1.SkipNodeOperation, path *field.Path) field.ErrorList {
	has := map[resourcev1.SkipNodeOperation]bool{}
	for _, o := range ops {
		has[o] = true
	}
	if has[resourcev1.SkipNodeOperationNodePrepareResources] && !has[resourcev1.SkipNodeOperationNodeUnprepareResources] && !has[resourcev1.SkipNodeOperationAll] {
		return field.ErrorList{field.Invalid(path, omit, "NodePrepareResources may only be skipped together with NodeUnprepareResources (or '*')")}
	}
	return nil
}
