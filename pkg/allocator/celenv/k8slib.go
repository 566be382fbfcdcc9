package celenv

// The Kubernetes CEL function libraries that the resource.k8s.io/v1 device
// selector environment enables (k8s.io/apiserver/pkg/cel/library), written
// for cel.dev/cel-go: quantity, semver, regex (find, findAll), URLs, IP and
// CIDR addresses, named formats and the Kubernetes list functions, each with
// upstream's function names, overload IDs, types, results and errors, and
// the upstream cost estimator's prices for them. See selectorv1.go for the
// environment that uses them.

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The Kubernetes CEL types, with upstream's type names. K8sQuantityType
// is the type of v1 device capacities.
var (
	K8sQuantityType = cel.ObjectType("kubernetes.Quantity")
	k8sSemverType   = cel.ObjectType("kubernetes.Semver")
	k8sURLType      = cel.ObjectType("kubernetes.URL")
	k8sFormatType   = cel.ObjectType("kubernetes.NamedFormat")
	k8sIPType       = cel.OpaqueType("net.IP")
	k8sCIDRType     = cel.OpaqueType("net.CIDR")
)

// NewK8sQuantity returns q as a kubernetes.Quantity value (a device
// capacity). The value holds q by value, as every method takes it, so
// evaluation never writes to the caller's quantity.
func NewK8sQuantity(q resource.Quantity) ref.Val { return k8sQuantity{q: q} }

// K8sVersion parses a version attribute strictly, as semver() does, into
// a kubernetes.Semver value, or returns the CEL error. Results are cached.
func K8sVersion(s string) ref.Val { return k8sVersions.get(s, parseK8sSemver) }

// k8sQuantity is a resource.Quantity as a CEL value. It holds the quantity
// by value and all its methods take value receivers: resource.Quantity's
// Cmp and String cache their work in the receiver, so a shared quantity
// (a cached literal) must never be the receiver itself.
type k8sQuantity struct{ q resource.Quantity }

func (v k8sQuantity) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[*resource.Quantity](), reflect.TypeFor[any]():
		q := v.q.DeepCopy()
		return &q, nil
	case reflect.TypeFor[string]():
		return v.q.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'Quantity' to '%v'", t)
}

func (v k8sQuantity) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case K8sQuantityType:
		return v
	case types.TypeType:
		return K8sQuantityType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", K8sQuantityType, t)
}

// Equal is true for equal amounts, whatever their notation.
func (v k8sQuantity) Equal(other ref.Val) ref.Val {
	o, ok := other.(k8sQuantity)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.q.Cmp(o.q) == 0)
}

func (v k8sQuantity) Type() ref.Type { return K8sQuantityType }

// Value returns a copy, as *resource.Quantity like upstream.
func (v k8sQuantity) Value() any {
	q := v.q.DeepCopy()
	return &q
}

// k8sSemver is a semantic version as a CEL value.
type k8sSemver struct{ v semver.Version }

func (v k8sSemver) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[semver.Version](), reflect.TypeFor[any]():
		return v.v, nil
	case reflect.TypeFor[string]():
		return v.v.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'Semver' to '%v'", t)
}

func (v k8sSemver) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case k8sSemverType:
		return v
	case types.TypeType:
		return k8sSemverType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", k8sSemverType, t)
}

// Equal compares precedence: build metadata is ignored, as semver 2.0 says.
func (v k8sSemver) Equal(other ref.Val) ref.Val {
	o, ok := other.(k8sSemver)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.v.EQ(o.v))
}

func (v k8sSemver) Type() ref.Type { return k8sSemverType }
func (v k8sSemver) Value() any     { return v.v }

// k8sURL is a parsed URL as a CEL value.
type k8sURL struct{ u *url.URL }

func (v k8sURL) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[*url.URL](), reflect.TypeFor[any]():
		return v.u, nil
	case reflect.TypeFor[string]():
		return v.u.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'URL' to '%v'", t)
}

func (v k8sURL) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case k8sURLType:
		return v
	case types.TypeType:
		return k8sURLType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", k8sURLType, t)
}

func (v k8sURL) Equal(other ref.Val) ref.Val {
	o, ok := other.(k8sURL)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.u.String() == o.u.String())
}

func (v k8sURL) Type() ref.Type { return k8sURLType }
func (v k8sURL) Value() any     { return v.u }

// k8sIP is an IP address as a CEL value.
type k8sIP struct{ netip.Addr }

func (v k8sIP) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[netip.Addr](), reflect.TypeFor[any]():
		return v.Addr, nil
	case reflect.TypeFor[string]():
		return v.Addr.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'IP' to '%v'", t)
}

func (v k8sIP) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case k8sIPType:
		return v
	case types.TypeType:
		return k8sIPType
	case types.StringType:
		return types.String(v.Addr.String())
	}
	return types.NewErr("type conversion error from '%s' to '%s'", k8sIPType, t)
}

func (v k8sIP) Equal(other ref.Val) ref.Val {
	o, ok := other.(k8sIP)
	if !ok {
		return types.ValOrErr(other, "no such overload")
	}
	return types.Bool(v.Addr == o.Addr)
}

func (v k8sIP) Type() ref.Type { return k8sIPType }
func (v k8sIP) Value() any     { return v.Addr }

// Size is the address length in bytes, for runtime cost.
func (v k8sIP) Size() ref.Val { return types.Int((v.Addr.BitLen() + 7) / 8) }

// k8sCIDR is an address range as a CEL value.
type k8sCIDR struct{ netip.Prefix }

func (v k8sCIDR) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[netip.Prefix](), reflect.TypeFor[any]():
		return v.Prefix, nil
	case reflect.TypeFor[string]():
		return v.Prefix.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'CIDR' to '%v'", t)
}

func (v k8sCIDR) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case k8sCIDRType:
		return v
	case types.TypeType:
		return k8sCIDRType
	case types.StringType:
		return types.String(v.Prefix.String())
	}
	return types.NewErr("type conversion error from '%s' to '%s'", k8sCIDRType, t)
}

func (v k8sCIDR) Equal(other ref.Val) ref.Val {
	o, ok := other.(k8sCIDR)
	if !ok {
		return types.ValOrErr(other, "no such overload")
	}
	return types.Bool(v.Prefix == o.Prefix)
}

func (v k8sCIDR) Type() ref.Type { return k8sCIDRType }
func (v k8sCIDR) Value() any     { return v.Prefix }

// Size is the prefix length in bytes, for runtime cost.
func (v k8sCIDR) Size() ref.Val { return types.Int((v.Prefix.Bits() + 7) / 8) }

// k8sFormat is a named string format (format.dns1123Label() and so on).
type k8sFormat struct {
	name     string
	validate func(string) []string
	// maxRegexSize is the size of the regular expression the format is, or
	// is as costly as, for cost estimation.
	maxRegexSize int
}

func (v *k8sFormat) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from 'Format' to '%v'", t)
}

func (v *k8sFormat) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case k8sFormatType:
		return v
	case types.TypeType:
		return k8sFormatType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", k8sFormatType, t)
}

func (v *k8sFormat) Equal(other ref.Val) ref.Val {
	o, ok := other.(*k8sFormat)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.name == o.name)
}

func (v *k8sFormat) Type() ref.Type { return k8sFormatType }
func (v *k8sFormat) Value() any     { return v }

// Cost assumptions of the format library (k8s.io/apiserver/pkg/cel).
const (
	k8sMaxFormatSize          = 64
	k8sMaxNameFormatRegexSize = 128
	k8sURLRegexSize           = 1103 // govalidator's URL expression
	k8sBase64RegexSize        = 84
	k8sUUIDPattern            = `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`
	k8sBase64Pattern          = `^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$`
	k8sTimePattern            = `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`
)

var (
	k8sUUIDRegexp   = regexp.MustCompile(k8sUUIDPattern)
	k8sBase64Regexp = regexp.MustCompile(k8sBase64Pattern)
	k8sTimeRegexp   = regexp.MustCompile(k8sTimePattern)
)

// k8sIsDate and k8sIsDateTime are the OpenAPI "date" and "datetime" checks
// of k8s.io/kube-openapi's strfmt.
func k8sIsDate(s string) bool {
	_, err := time.Parse("2006-01-02", s)
	return err == nil
}

func k8sIsDateTime(s string) bool {
	if len(s) < 4 {
		return false
	}
	parts := strings.Split(strings.ToLower(s), "t")
	if len(parts) < 2 || !k8sIsDate(parts[0]) {
		return false
	}
	m := k8sTimeRegexp.FindStringSubmatch(parts[1])
	return m != nil && m[1] <= "23" && m[2] <= "59" && m[3] <= "59"
}

func k8sCheck(ok func(string) bool, msg string) func(string) []string {
	return func(s string) []string {
		if ok(s) {
			return nil
		}
		return []string{msg}
	}
}

// k8sFormats are the named formats, by the name format.named() takes.
var k8sFormats = map[string]*k8sFormat{
	"dns1123Label": {name: "DNS1123Label", maxRegexSize: 30,
		validate: func(s string) []string { return apimachineryvalidation.NameIsDNSLabel(s, false) }},
	"dns1123Subdomain": {name: "DNS1123Subdomain", maxRegexSize: 60,
		validate: func(s string) []string { return apimachineryvalidation.NameIsDNSSubdomain(s, false) }},
	"dns1035Label": {name: "DNS1035Label", maxRegexSize: 30,
		validate: func(s string) []string { return apimachineryvalidation.NameIsDNS1035Label(s, false) }},
	"qualifiedName": {name: "QualifiedName", maxRegexSize: 60, validate: validation.IsQualifiedName},
	"dns1123LabelPrefix": {name: "DNS1123LabelPrefix", maxRegexSize: 30,
		validate: func(s string) []string { return apimachineryvalidation.NameIsDNSLabel(s, true) }},
	"dns1123SubdomainPrefix": {name: "DNS1123SubdomainPrefix", maxRegexSize: 60,
		validate: func(s string) []string { return apimachineryvalidation.NameIsDNSSubdomain(s, true) }},
	"dns1035LabelPrefix": {name: "DNS1035LabelPrefix", maxRegexSize: 30,
		validate: func(s string) []string { return apimachineryvalidation.NameIsDNS1035Label(s, true) }},
	"labelValue": {name: "LabelValue", maxRegexSize: 40, validate: validation.IsValidLabelValue},
	"uri": {name: "URI", maxRegexSize: k8sURLRegexSize, validate: func(s string) []string {
		if _, err := url.ParseRequestURI(s); err != nil {
			return []string{err.Error()}
		}
		return nil
	}},
	"uuid": {name: "uuid", maxRegexSize: len(k8sUUIDPattern),
		validate: k8sCheck(k8sUUIDRegexp.MatchString, "does not match the UUID format")},
	"byte": {name: "byte", maxRegexSize: k8sBase64RegexSize,
		validate: k8sCheck(k8sBase64Regexp.MatchString, "invalid base64")},
	"date": {name: "date", maxRegexSize: len(k8sTimePattern), validate: k8sCheck(k8sIsDate, "invalid date")},
	"datetime": {name: "datetime", maxRegexSize: len(k8sTimePattern),
		validate: k8sCheck(k8sIsDateTime, "invalid datetime")},
}

// k8sQuantities and k8sVersions hold the upstream environment's parsed
// string operands (see literalCache).
var k8sQuantities, k8sVersions literalCache

// parseK8sQuantity parses like resource.ParseQuantity, but refuses strings
// that would take seconds to parse or compare (see parseQuantity):
// upstream accepts them, allot does not run them.
func parseK8sQuantity(s string) ref.Val {
	q, err := parseQuantity(s)
	if slow := (*errSlowQuantity)(nil); errors.As(err, &slow) {
		return types.NewErr("quantities of this form are not supported: %v", slow)
	}
	if err != nil {
		return types.WrapErr(err)
	}
	return k8sQuantity{q: q}
}

// parseK8sSemver parses a strict semantic version, as semver() and version
// attributes do.
func parseK8sSemver(s string) ref.Val {
	v, err := semver.Parse(s)
	if err != nil {
		return types.WrapErr(err)
	}
	return k8sSemver{v: v}
}

// normalizeSemver is semver(s, true)'s parsing: a leading "v" is dropped,
// missing minor and patch numbers are 0 and leading zeros are removed.
// Unlike semver.ParseTolerant, spaces are not trimmed.
func normalizeSemver(s string) (semver.Version, error) {
	s = strings.TrimPrefix(s, "v")
	parts := strings.SplitN(s, ".", 3)
	for i, p := range parts {
		if len(p) > 1 {
			p = strings.TrimLeft(p, "0")
			if p == "" || !strings.ContainsAny(p[:1], "0123456789") {
				p = "0" + p
			}
			parts[i] = p
		}
	}
	if len(parts) < 3 {
		if strings.ContainsAny(parts[len(parts)-1], "+-") {
			return semver.Version{}, errors.New("short version cannot contain PreRelease/Build meta data")
		}
		for len(parts) < 3 {
			parts = append(parts, "0")
		}
	}
	return semver.Parse(strings.Join(parts, "."))
}

// K8sEnvOptions are the options of Kubernetes' base CEL environment, as
// upstream's device selectors see it: the standard library, optional
// types, cross-type numeric comparisons, homogeneous aggregate literals,
// the string extensions at version 2, sets, two-variable comprehensions,
// the list extensions at version 3, cel.bind, and K8sLibrary. The caller
// adds its variables.
func K8sEnvOptions(listsVersion uint32) []cel.EnvOption {
	opts := []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(cel.OptionalTypesVersion(2)),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(ext.SetsVersion(0)),
		ext.TwoVarComprehensions(),
		ext.Lists(ext.ListsVersion(3)),
		ext.Bindings(ext.BindingsVersion(0)),
	}
	return append(opts, K8sLibrary(listsVersion)...)
}

// K8sProgramOptions are the program options of that environment: cost
// tracking with upstream's prices, bounded at costLimit per evaluation,
// and constant regular expressions compiled once.
func K8sProgramOptions(costLimit uint64) []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostLimit(costLimit),
		cel.CostTracking(NewCostEstimator(nil)),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.OptimizeRegex(RegexOptimizations...),
	}
}

// K8sLibrary declares the Kubernetes libraries. listsVersion is the
// version of the Kubernetes list library: 0 for new expressions at the
// compatibility version of Kubernetes 1.36, 1 (adds includes) for stored
// expressions.
func K8sLibrary(listsVersion uint32) []cel.EnvOption {
	opts := []cel.EnvOption{
		cel.Types(K8sQuantityType, k8sSemverType, k8sURLType, k8sFormatType, k8sIPType, k8sCIDRType),
	}
	add := func(name string, overloads ...cel.FunctionOpt) {
		opts = append(opts, cel.Function(name, overloads...))
	}
	str, boolean, integer := cel.StringType, cel.BoolType, cel.IntType
	Q, S, IP, CIDR := K8sQuantityType, k8sSemverType, k8sIPType, k8sCIDRType
	member := cel.MemberOverload
	global := cel.Overload
	typeList := func(ts ...*cel.Type) []*cel.Type { return ts }

	// Quantity. sign is a global function, as upstream declares it:
	// sign(quantity("1")), not quantity("1").sign().
	add("quantity", global("string_to_quantity", typeList(str), Q, cel.UnaryBinding(stringToK8sQuantity)))
	add("isQuantity", global("is_quantity_string", typeList(str), boolean, cel.UnaryBinding(isK8sQuantity)))
	add("sign", global("quantity_sign", typeList(Q), integer, cel.UnaryBinding(quantityUnary(func(q *resource.Quantity) ref.Val {
		return types.Int(q.Sign())
	}))))
	add("asApproximateFloat", member("quantity_get_float", typeList(Q), cel.DoubleType, cel.UnaryBinding(quantityUnary(func(q *resource.Quantity) ref.Val {
		return types.Double(q.AsApproximateFloat64())
	}))))
	add("asInteger", member("quantity_get_int", typeList(Q), integer, cel.UnaryBinding(quantityUnary(func(q *resource.Quantity) ref.Val {
		v, ok := q.AsInt64()
		if !ok {
			return types.NewErr("cannot convert value to integer")
		}
		return types.Int(v)
	}))))
	add("isInteger", member("quantity_is_integer", typeList(Q), boolean, cel.UnaryBinding(quantityUnary(func(q *resource.Quantity) ref.Val {
		_, ok := q.AsInt64()
		return types.Bool(ok)
	}))))
	add("add",
		member("quantity_add", typeList(Q, Q), Q, cel.BinaryBinding(quantityArith(false))),
		member("quantity_add_int", typeList(Q, integer), Q, cel.BinaryBinding(quantityArith(false))))
	add("sub",
		member("quantity_sub", typeList(Q, Q), Q, cel.BinaryBinding(quantityArith(true))),
		member("quantity_sub_int", typeList(Q, integer), Q, cel.BinaryBinding(quantityArith(true))))

	// Quantity and semver comparisons.
	add("isGreaterThan",
		member("quantity_is_greater_than", typeList(Q, Q), boolean, cel.BinaryBinding(k8sCompare(func(c int) ref.Val { return types.Bool(c == 1) }))),
		member("semver_is_greater_than", typeList(S, S), boolean, cel.BinaryBinding(k8sCompare(func(c int) ref.Val { return types.Bool(c == 1) }))))
	add("isLessThan",
		member("quantity_is_less_than", typeList(Q, Q), boolean, cel.BinaryBinding(k8sCompare(func(c int) ref.Val { return types.Bool(c == -1) }))),
		member("semver_is_less_than", typeList(S, S), boolean, cel.BinaryBinding(k8sCompare(func(c int) ref.Val { return types.Bool(c == -1) }))))
	add("compareTo",
		member("quantity_compare_to", typeList(Q, Q), integer, cel.BinaryBinding(k8sCompare(func(c int) ref.Val { return types.Int(c) }))),
		member("semver_compare_to", typeList(S, S), integer, cel.BinaryBinding(k8sCompare(func(c int) ref.Val { return types.Int(c) }))))

	// Semver (library version 1: with the normalize argument).
	add("semver",
		global("string_to_semver", typeList(str), S, cel.UnaryBinding(func(arg ref.Val) ref.Val { return stringToK8sSemver(arg, types.False) })),
		global("string_bool_to_semver", typeList(str, boolean), S, cel.BinaryBinding(stringToK8sSemver)))
	add("isSemver",
		global("is_semver_string", typeList(str), boolean, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			if _, ok := arg.(types.String); !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			return types.Bool(!types.IsError(stringToK8sSemver(arg, types.False)))
		})),
		global("is_semver_string_bool", typeList(str, boolean), boolean, cel.BinaryBinding(func(arg, norm ref.Val) ref.Val {
			if _, ok := arg.(types.String); !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			if _, ok := norm.(types.Bool); !ok {
				return types.MaybeNoSuchOverloadErr(norm)
			}
			return types.Bool(!types.IsError(stringToK8sSemver(arg, norm)))
		})))
	for name, part := range map[string]func(semver.Version) uint64{
		"major": func(v semver.Version) uint64 { return v.Major },
		"minor": func(v semver.Version) uint64 { return v.Minor },
		"patch": func(v semver.Version) uint64 { return v.Patch },
	} {
		add(name, member("semver_"+name, typeList(S), integer, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			v, ok := arg.(k8sSemver)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			return types.Int(part(v.v))
		})))
	}

	// Regex.
	add("find", member("string_find_string", typeList(str, str), str, cel.BinaryBinding(k8sFind)))
	add("findAll",
		member("string_find_all_string", typeList(str, str), cel.ListType(str), cel.BinaryBinding(func(s, re ref.Val) ref.Val {
			return k8sFindAll(s, re, types.Int(-1))
		})),
		member("string_find_all_string_int", typeList(str, str, integer), cel.ListType(str), cel.FunctionBinding(func(args ...ref.Val) ref.Val {
			if len(args) != 3 {
				return types.NoSuchOverloadErr()
			}
			return k8sFindAll(args[0], args[1], args[2])
		})))

	// URLs.
	add("url", global("string_to_url", typeList(str), k8sURLType, cel.UnaryBinding(stringToK8sURL)))
	add("isURL", global("is_url_string", typeList(str), boolean, cel.UnaryBinding(func(arg ref.Val) ref.Val {
		s, ok := arg.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		_, err := url.ParseRequestURI(string(s))
		return types.Bool(err == nil)
	})))
	urlGetter := func(name, id string, get func(*url.URL) string) {
		add(name, member(id, typeList(k8sURLType), str, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			u, ok := arg.(k8sURL)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			return types.String(get(u.u))
		})))
	}
	urlGetter("getScheme", "url_get_scheme", func(u *url.URL) string { return u.Scheme })
	urlGetter("getHost", "url_get_host", func(u *url.URL) string { return u.Host })
	urlGetter("getHostname", "url_get_hostname", (*url.URL).Hostname)
	urlGetter("getPort", "url_get_port", (*url.URL).Port)
	urlGetter("getEscapedPath", "url_get_escaped_path", (*url.URL).EscapedPath)
	add("getQuery", member("url_get_query", typeList(k8sURLType), cel.MapType(str, cel.ListType(str)), cel.UnaryBinding(func(arg ref.Val) ref.Val {
		u, ok := arg.(k8sURL)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		m := map[ref.Val]ref.Val{}
		for k, v := range u.u.Query() {
			m[types.String(k)] = types.NewStringList(types.DefaultTypeAdapter, v)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	})))

	// IP addresses.
	add("ip",
		global("string_to_ip", typeList(str), IP, cel.UnaryBinding(stringToK8sIP)),
		member("cidr_ip", typeList(CIDR), IP, cel.UnaryBinding(cidrUnary(func(p netip.Prefix) ref.Val { return k8sIP{p.Addr()} }))))
	add("isIP", global("is_ip", typeList(str), boolean, cel.UnaryBinding(func(arg ref.Val) ref.Val {
		s, ok := arg.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		_, err := parseK8sIP(string(s))
		return types.Bool(err == nil)
	})))
	add("ip.isCanonical", global("ip_is_canonical", typeList(str), boolean, cel.UnaryBinding(func(arg ref.Val) ref.Val {
		s, ok := arg.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		addr, err := parseK8sIP(string(s))
		if err != nil {
			return types.NewErr("%v", err)
		}
		return types.Bool(addr.String() == string(s))
	})))
	add("family", member("ip_family", typeList(IP), integer, cel.UnaryBinding(ipUnary(func(a netip.Addr) ref.Val {
		switch {
		case a.Is4():
			return types.Int(4)
		case a.Is6():
			return types.Int(6)
		}
		return types.NewErr("IP address %q is not an IPv4 or IPv6 address", a.String())
	}))))
	ipPredicate := func(name, id string, pred func(netip.Addr) bool) {
		add(name, member(id, typeList(IP), boolean, cel.UnaryBinding(ipUnary(func(a netip.Addr) ref.Val {
			return types.Bool(pred(a))
		}))))
	}
	ipPredicate("isUnspecified", "ip_is_unspecified", netip.Addr.IsUnspecified)
	ipPredicate("isLoopback", "ip_is_loopback", netip.Addr.IsLoopback)
	ipPredicate("isLinkLocalMulticast", "ip_is_link_local_multicast", netip.Addr.IsLinkLocalMulticast)
	ipPredicate("isLinkLocalUnicast", "ip_is_link_local_unicast", netip.Addr.IsLinkLocalUnicast)
	ipPredicate("isGlobalUnicast", "ip_is_global_unicast", netip.Addr.IsGlobalUnicast)
	add("string",
		global("ip_to_string", typeList(IP), str, cel.UnaryBinding(ipUnary(func(a netip.Addr) ref.Val { return types.String(a.String()) }))),
		global("cidr_to_string", typeList(CIDR), str, cel.UnaryBinding(cidrUnary(func(p netip.Prefix) ref.Val { return types.String(p.String()) }))))

	// CIDR ranges.
	add("cidr", global("string_to_cidr", typeList(str), CIDR, cel.UnaryBinding(stringToK8sCIDR)))
	add("isCIDR", global("is_cidr", typeList(str), boolean, cel.UnaryBinding(func(arg ref.Val) ref.Val {
		s, ok := arg.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		_, err := parseK8sCIDR(string(s))
		return types.Bool(err == nil)
	})))
	add("containsIP",
		member("cidr_contains_ip_string", typeList(CIDR, str), boolean, cel.BinaryBinding(func(c, s ref.Val) ref.Val {
			return cidrContainsIP(c, stringToK8sIP(s))
		})),
		member("cidr_contains_ip_ip", typeList(CIDR, IP), boolean, cel.BinaryBinding(cidrContainsIP)))
	add("containsCIDR",
		member("cidr_contains_cidr_string", typeList(CIDR, str), boolean, cel.BinaryBinding(func(c, s ref.Val) ref.Val {
			return cidrContainsCIDR(c, stringToK8sCIDR(s))
		})),
		member("cidr_contains_cidr", typeList(CIDR, CIDR), boolean, cel.BinaryBinding(cidrContainsCIDR)))
	add("prefixLength", member("cidr_prefix_length", typeList(CIDR), integer, cel.UnaryBinding(cidrUnary(func(p netip.Prefix) ref.Val {
		return types.Int(p.Bits())
	}))))
	add("masked", member("cidr_masked", typeList(CIDR), CIDR, cel.UnaryBinding(cidrUnary(func(p netip.Prefix) ref.Val {
		return k8sCIDR{p.Masked()}
	}))))

	// Named formats.
	add("validate", member("format-validate", typeList(k8sFormatType, str), cel.OptionalType(cel.ListType(str)), cel.BinaryBinding(func(f, s ref.Val) ref.Val {
		format, ok := f.(*k8sFormat)
		if !ok {
			return types.MaybeNoSuchOverloadErr(f)
		}
		str, ok := s.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(s)
		}
		if msgs := format.validate(string(str)); len(msgs) > 0 {
			return types.OptionalOf(types.NewStringList(types.DefaultTypeAdapter, msgs))
		}
		return types.OptionalNone
	})))
	add("format.named", global("format-named", typeList(str), cel.OptionalType(k8sFormatType), cel.UnaryBinding(func(name ref.Val) ref.Val {
		s, ok := name.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(name)
		}
		if f, ok := k8sFormats[string(s)]; ok {
			return types.OptionalOf(f)
		}
		return types.OptionalNone
	})))
	for name, f := range k8sFormats {
		add("format."+name, global("format."+name, nil, k8sFormatType, cel.FunctionBinding(func(...ref.Val) ref.Val { return f })))
	}

	// Lists.
	for _, t := range k8sComparableTypes {
		add("isSorted", member(fmt.Sprintf("list_%s_is_sorted_bool", t.name), typeList(cel.ListType(t.t)), boolean, cel.UnaryBinding(k8sIsSorted)))
		add("max", member(fmt.Sprintf("list_%s_max_%s", t.name, t.name), typeList(cel.ListType(t.t)), t.t, cel.UnaryBinding(k8sExtreme("max", types.IntNegOne))))
		add("min", member(fmt.Sprintf("list_%s_min_%s", t.name, t.name), typeList(cel.ListType(t.t)), t.t, cel.UnaryBinding(k8sExtreme("min", types.IntOne))))
	}
	for _, t := range k8sSummableTypes {
		add("sum", member(fmt.Sprintf("list_%s_sum_%s", t.name, t.name), typeList(cel.ListType(t.t)), t.t, cel.UnaryBinding(k8sSum(t.zero))))
	}
	a := cel.TypeParamType("A")
	add("indexOf", member("list_a_index_of_int", typeList(cel.ListType(a), a), integer, cel.BinaryBinding(k8sIndexOf(false))))
	add("lastIndexOf", member("list_a_last_index_of_int", typeList(cel.ListType(a), a), integer, cel.BinaryBinding(k8sIndexOf(true))))
	if listsVersion >= 1 {
		add("includes", member("list_includes_dyn_dyn", typeList(cel.DynType, cel.DynType), boolean, cel.BinaryBinding(k8sIncludes)))
	}
	return opts
}

// RegexOptimizations compile constant patterns of find and findAll once,
// at program creation; a bad constant pattern fails the program there.
var RegexOptimizations = []*interpreter.RegexOptimization{
	{Function: "find", RegexIndex: 1, Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, err
		}
		return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
			if len(args) != 2 {
				return types.NoSuchOverloadErr()
			}
			s, ok := args[0].(types.String)
			if !ok {
				return types.MaybeNoSuchOverloadErr(args[0])
			}
			return types.String(re.FindString(string(s)))
		}), nil
	}},
	{Function: "findAll", RegexIndex: 1, Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, err
		}
		return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
			if len(args) < 2 || len(args) > 3 {
				return types.NoSuchOverloadErr()
			}
			s, ok := args[0].(types.String)
			if !ok {
				return types.MaybeNoSuchOverloadErr(args[0])
			}
			n := types.Int(-1)
			if len(args) == 3 {
				if n, ok = args[2].(types.Int); !ok {
					return types.MaybeNoSuchOverloadErr(args[2])
				}
			}
			return types.NewStringList(types.DefaultTypeAdapter, re.FindAllString(string(s), int(n)))
		}), nil
	}},
}

func stringToK8sQuantity(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	return k8sQuantities.get(string(s), parseK8sQuantity)
}

func isK8sQuantity(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	return types.Bool(!types.IsError(k8sQuantities.get(string(s), parseK8sQuantity)))
}

func quantityUnary(f func(*resource.Quantity) ref.Val) func(ref.Val) ref.Val {
	return func(arg ref.Val) ref.Val {
		q, ok := arg.(k8sQuantity)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return f(&q.q) // q is this call's copy
	}
}

// quantityArith is add or sub with a quantity or an integer operand.
func quantityArith(sub bool) func(ref.Val, ref.Val) ref.Val {
	return func(arg, other ref.Val) ref.Val {
		q, ok := arg.(k8sQuantity)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		var o resource.Quantity
		switch v := other.(type) {
		case k8sQuantity:
			o = v.q
		case types.Int:
			o = *resource.NewQuantity(int64(v), resource.DecimalExponent)
		default:
			return types.MaybeNoSuchOverloadErr(other)
		}
		r := q.q.DeepCopy()
		if sub {
			r.Sub(o)
		} else {
			r.Add(o)
		}
		return k8sQuantity{q: r}
	}
}

// k8sCompare compares two quantities or two semantic versions.
func k8sCompare(result func(int) ref.Val) func(ref.Val, ref.Val) ref.Val {
	return func(arg, other ref.Val) ref.Val {
		switch a := arg.(type) {
		case k8sQuantity:
			if o, ok := other.(k8sQuantity); ok {
				return result(a.q.Cmp(o.q))
			}
		case k8sSemver:
			if o, ok := other.(k8sSemver); ok {
				return result(a.v.Compare(o.v))
			}
		default:
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return types.MaybeNoSuchOverloadErr(other)
	}
}

func stringToK8sSemver(arg, normalize ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	norm, ok := normalize.(types.Bool)
	if !ok {
		return types.MaybeNoSuchOverloadErr(normalize)
	}
	if !norm {
		return k8sVersions.get(string(s), parseK8sSemver)
	}
	v, err := normalizeSemver(string(s))
	if err != nil {
		return types.WrapErr(err)
	}
	return k8sSemver{v: v}
}

func k8sFind(strVal, reVal ref.Val) ref.Val {
	s, ok := strVal.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(strVal)
	}
	pattern, ok := reVal.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(reVal)
	}
	re, err := regexp.Compile(string(pattern))
	if err != nil {
		return types.NewErr("Illegal regex: %v", err.Error())
	}
	return types.String(re.FindString(string(s)))
}

func k8sFindAll(strVal, reVal, nVal ref.Val) ref.Val {
	s, ok := strVal.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(strVal)
	}
	pattern, ok := reVal.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(reVal)
	}
	n, ok := nVal.(types.Int)
	if !ok {
		return types.MaybeNoSuchOverloadErr(nVal)
	}
	re, err := regexp.Compile(string(pattern))
	if err != nil {
		return types.NewErr("Illegal regex: %v", err.Error())
	}
	return types.NewStringList(types.DefaultTypeAdapter, re.FindAllString(string(s), int(n)))
}

func stringToK8sURL(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	// ParseRequestURI requires an absolute URL (as the OpenAPI "uri"
	// format does); Parse then gets the fragment right.
	if _, err := url.ParseRequestURI(string(s)); err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	u, err := url.Parse(string(s))
	if err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	return k8sURL{u: u}
}

// parseK8sIP parses an IP address, refusing zones and IPv4-mapped IPv6
// addresses.
func parseK8sIP(raw string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(raw)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("IP Address %q parse error during conversion from string: %v", raw, err)
	}
	if addr.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %q with zone value is not allowed", raw)
	}
	if addr.Is4In6() {
		return netip.Addr{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", raw)
	}
	return addr, nil
}

// parseK8sCIDR parses an address range, refusing IPv4-mapped IPv6
// addresses. Host bits may be set.
func parseK8sCIDR(raw string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(raw)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network address parse error during conversion from string: %v", err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", raw)
	}
	return p, nil
}

func stringToK8sIP(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	addr, err := parseK8sIP(string(s))
	if err != nil {
		return types.NewErr("%v", err)
	}
	return k8sIP{addr}
}

func stringToK8sCIDR(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	p, err := parseK8sCIDR(string(s))
	if err != nil {
		return types.NewErr("network address parse error during conversion from string: %v", err)
	}
	return k8sCIDR{p}
}

func ipUnary(f func(netip.Addr) ref.Val) func(ref.Val) ref.Val {
	return func(arg ref.Val) ref.Val {
		ip, ok := arg.(k8sIP)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return f(ip.Addr)
	}
}

func cidrUnary(f func(netip.Prefix) ref.Val) func(ref.Val) ref.Val {
	return func(arg ref.Val) ref.Val {
		c, ok := arg.(k8sCIDR)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return f(c.Prefix)
	}
}

func cidrContainsIP(c, other ref.Val) ref.Val {
	cidr, ok := c.(k8sCIDR)
	if !ok {
		return types.MaybeNoSuchOverloadErr(c)
	}
	ip, ok := other.(k8sIP)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(cidr.Contains(ip.Addr))
}

func cidrContainsCIDR(c, other ref.Val) ref.Val {
	cidr, ok := c.(k8sCIDR)
	if !ok {
		return types.MaybeNoSuchOverloadErr(c)
	}
	o, ok := other.(k8sCIDR)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(cidr.Overlaps(o.Prefix) && cidr.Bits() <= o.Bits())
}

type k8sListType struct {
	name string
	t    *cel.Type
	zero ref.Val
}

var k8sComparableTypes = []k8sListType{
	{name: "int", t: cel.IntType}, {name: "uint", t: cel.UintType}, {name: "double", t: cel.DoubleType},
	{name: "bool", t: cel.BoolType}, {name: "duration", t: cel.DurationType}, {name: "timestamp", t: cel.TimestampType},
	{name: "string", t: cel.StringType}, {name: "bytes", t: cel.BytesType},
}

var k8sSummableTypes = []k8sListType{
	{name: "int", t: cel.IntType, zero: types.IntZero}, {name: "uint", t: cel.UintType, zero: types.Uint(0)},
	{name: "double", t: cel.DoubleType, zero: types.Double(0)}, {name: "duration", t: cel.DurationType, zero: types.Duration{}},
}

func k8sIsSorted(val ref.Val) ref.Val {
	list, ok := val.(traits.Iterable)
	if !ok {
		return types.MaybeNoSuchOverloadErr(val)
	}
	var prev traits.Comparer
	for it := list.Iterator(); it.HasNext() == types.True; {
		next := it.Next()
		cmp, ok := next.(traits.Comparer)
		if !ok {
			return types.MaybeNoSuchOverloadErr(next)
		}
		if prev != nil && prev.Compare(next) == types.IntOne {
			return types.False
		}
		prev = cmp
	}
	return types.True
}

func k8sSum(zero ref.Val) func(ref.Val) ref.Val {
	return func(val ref.Val) ref.Val {
		list, ok := val.(traits.Iterable)
		if !ok {
			return types.MaybeNoSuchOverloadErr(val)
		}
		acc := zero
		for it := list.Iterator(); it.HasNext() == types.True; {
			adder, ok := acc.(traits.Adder)
			if !ok {
				return types.MaybeNoSuchOverloadErr(acc)
			}
			acc = adder.Add(it.Next())
			if types.IsError(acc) {
				return acc
			}
		}
		return acc
	}
}

// k8sExtreme is max (prefer is -1: keep the later element when the kept one
// compares less) or min (prefer is 1).
func k8sExtreme(name string, prefer ref.Val) func(ref.Val) ref.Val {
	return func(val ref.Val) ref.Val {
		list, ok := val.(traits.Iterable)
		if !ok {
			return types.MaybeNoSuchOverloadErr(val)
		}
		var result traits.Comparer
		for it := list.Iterator(); it.HasNext() == types.True; {
			next := it.Next()
			cmp, ok := next.(traits.Comparer)
			if !ok {
				return types.MaybeNoSuchOverloadErr(next)
			}
			if result == nil || result.Compare(next) == prefer {
				result = cmp
			}
		}
		if result == nil {
			return types.NewErr("%s called on empty list", name)
		}
		return result.(ref.Val)
	}
}

func k8sIndexOf(last bool) func(ref.Val, ref.Val) ref.Val {
	return func(listVal, item ref.Val) ref.Val {
		list, ok := listVal.(traits.Lister)
		if !ok {
			return types.MaybeNoSuchOverloadErr(listVal)
		}
		n := list.Size().(types.Int)
		for j := types.Int(0); j < n; j++ {
			i := j
			if last {
				i = n - 1 - j
			}
			if list.Get(i).Equal(item) == types.True {
				return i
			}
		}
		return types.Int(-1)
	}
}

func k8sIncludes(target, arg ref.Val) ref.Val {
	if list, ok := target.(traits.Lister); ok {
		for it := list.Iterator(); it.HasNext() == types.True; {
			if it.Next().Equal(arg) == types.True {
				return types.True
			}
		}
		return types.False
	}
	return types.Bool(target.Equal(arg) == types.True)
}

// CostEstimator prices the Kubernetes library functions as upstream's
// library.CostEstimator does, for the static estimate (EstimateCallCost,
// with sizes from size) and for runtime cost tracking (CallCost). Functions
// it does not price fall back to cel-go's own prices.
type CostEstimator struct {
	size func(cost.AstNode) *cost.SizeEstimate
}

// NewCostEstimator returns the estimator with the environment's variable
// sizes (nil: none known, as for runtime cost tracking).
func NewCostEstimator(size func(cost.AstNode) *cost.SizeEstimate) *CostEstimator {
	return &CostEstimator{size: size}
}

var (
	_ cost.Estimator           = (*CostEstimator)(nil)
	_ cost.ActualCostEstimator = (*CostEstimator)(nil)
)

// fixedCost returns a pointer to c; small costs point into a shared table,
// which saves an allocation per priced call (the tracker only reads it).
func fixedCost(c uint64) *uint64 {
	if c < uint64(len(smallCosts)) {
		return &smallCosts[c]
	}
	p := new(uint64) // not &c: c would then be moved to the heap on every call
	*p = c
	return p
}

var smallCosts = func() (t [256]uint64) {
	for i := range t {
		t[i] = uint64(i)
	}
	return t
}()

func factorCost(size uint64, factor float64) *uint64 {
	return fixedCost(uint64(math.Ceil(float64(size) * factor)))
}

// k8sActualSize is the size of a runtime value: its length if it has one,
// else 1.
func k8sActualSize(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok {
			return uint64(n)
		}
	}
	return 1
}

// CallCost implements cost.ActualCostEstimator.
func (e *CostEstimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	const strFactor = cost.StringTraversalCostFactor
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		var c uint64
		if len(args) > 0 {
			c = k8sTraversalCost(args[0])
		}
		return fixedCost(c)
	case "url", "lowerAscii", "upperAscii", "substring", "trim":
		if len(args) >= 1 {
			return factorCost(k8sActualSize(args[0]), strFactor)
		}
	case "replace", "split":
		if len(args) >= 1 {
			return factorCost(k8sActualSize(args[0]), 2*strFactor)
		}
	case "join":
		if len(args) >= 1 {
			return factorCost(k8sActualSize(result), 2*strFactor)
		}
	case "find", "findAll":
		if len(args) >= 2 {
			strCost := uint64(math.Ceil((1.0 + float64(k8sActualSize(args[0]))) * strFactor))
			reCost := uint64(math.Ceil(float64(k8sActualSize(args[1])) * cost.RegexStringLengthCostFactor))
			return fixedCost(strCost * reCost)
		}
	case "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		if len(args) >= 1 {
			return factorCost(k8sActualSize(args[0]), strFactor)
		}
	case "ip":
		if overloadID == "cidr_ip" {
			return fixedCost(1)
		}
		if len(args) >= 1 {
			return factorCost(k8sActualSize(args[0]), strFactor)
		}
	case "ip.isCanonical":
		if len(args) >= 1 {
			return factorCost(k8sActualSize(args[0]), 2*strFactor)
		}
	case "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast",
		"format.named", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub",
		"major", "minor", "patch", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery":
		return fixedCost(1)
	case "containsIP", "containsCIDR":
		if len(args) >= 2 {
			cidrSize, otherSize := k8sActualSize(args[0]), k8sActualSize(args[1])
			c := uint64(math.Ceil(float64(2*cidrSize) * strFactor))
			if function == "containsCIDR" {
				c += uint64(math.Ceil(float64(cidrSize)*strFactor)) + 1
			}
			if overloadID == "cidr_contains_ip_string" || overloadID == "cidr_contains_cidr_string" {
				c += uint64(math.Ceil(float64(otherSize) * strFactor))
			}
			return fixedCost(c)
		}
	case "validate":
		if len(args) >= 2 {
			if f, ok := args[0].(*k8sFormat); ok {
				strCost := uint64(math.Ceil((1.0 + float64(k8sActualSize(args[1]))) * strFactor))
				reCost := uint64(math.Ceil(float64(f.maxRegexSize) * cost.RegexStringLengthCostFactor))
				return fixedCost(strCost * reCost)
			}
		}
	case "_==_":
		if len(args) == 2 {
			switch args[0].(type) {
			case k8sQuantity, k8sSemver, k8sIP, k8sCIDR, *k8sFormat, k8sURL:
				return fixedCost(1)
			}
		}
	default:
		if strings.HasPrefix(function, "format.") {
			if _, ok := k8sFormats[strings.TrimPrefix(function, "format.")]; ok {
				return fixedCost(1)
			}
		}
	}
	return nil
}

// k8sTraversalCost is the cost of walking a value as a data tree.
func k8sTraversalCost(v ref.Val) uint64 {
	switch vt := v.(type) {
	case types.String:
		return uint64(float64(len(vt)) * cost.StringTraversalCostFactor)
	case types.Bytes:
		return uint64(float64(len(vt)) * cost.StringTraversalCostFactor)
	case traits.Lister:
		var c uint64
		for it := vt.Iterator(); it.HasNext() == types.True; {
			c += k8sTraversalCost(it.Next())
		}
		return c
	case traits.Mapper:
		var c uint64
		for it := vt.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			c += k8sTraversalCost(k) + k8sTraversalCost(vt.Get(k))
		}
		return c
	}
	return 1
}

// EstimateSize implements cost.Estimator.
func (e *CostEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if e.size == nil {
		return nil
	}
	return e.size(n)
}

func (e *CostEstimator) sizeOf(n cost.AstNode) cost.SizeEstimate {
	if sz := n.ComputedSize(); sz != nil {
		return *sz
	}
	if sz := e.EstimateSize(n); sz != nil {
		return *sz
	}
	return cost.UnknownSizeEstimate()
}

// k8sItemsNode stands for the elements of a list in size estimates.
type k8sItemsNode struct {
	path []string
	t    *types.Type
}

func (n k8sItemsNode) Path() []string                   { return n.path }
func (n k8sItemsNode) Type() *types.Type                { return n.t }
func (n k8sItemsNode) Expr() ast.Expr                   { return nil }
func (n k8sItemsNode) ComputedSize() *cost.SizeEstimate { return nil }

func (e *CostEstimator) listElementNode(list cost.AstNode) cost.AstNode {
	params := list.Type().Parameters()
	if len(params) == 0 {
		return nil
	}
	var path []string
	if p := list.Path(); p != nil {
		path = append(append(make([]string, 0, len(p)+1), p...), "@items")
	}
	return k8sItemsNode{path: path, t: params[0]}
}

func costEstimate(min, max uint64) *cost.CallEstimate {
	return &cost.CallEstimate{CostEstimate: cost.CostEstimate{Min: min, Max: max}}
}

// EstimateCallCost implements cost.Estimator.
func (e *CostEstimator) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	const strFactor = cost.StringTraversalCostFactor
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		if target == nil {
			return nil
		}
		elCost := cost.CostEstimate{Min: 1, Max: 1}
		if el := e.listElementNode(*target); el != nil {
			if k := el.Type().Kind(); k == types.StringKind || k == types.BytesKind {
				elCost = elCost.Add(e.sizeOf(el).MultiplyByCostFactor(strFactor))
			}
			return &cost.CallEstimate{CostEstimate: e.sizeOf(*target).MultiplyByCost(elCost)}
		}
		if function == "includes" {
			return &cost.CallEstimate{CostEstimate: e.sizeOf(*target).MultiplyByCost(elCost)}
		}
		// indexOf and lastIndexOf of a string.
		return &cost.CallEstimate{CostEstimate: e.sizeOf(*target).MultiplyByCostFactor(strFactor)}
	case "url":
		if len(args) == 1 {
			sz := e.sizeOf(args[0])
			return &cost.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(strFactor), ResultSize: &sz}
		}
	case "lowerAscii", "upperAscii", "substring", "trim":
		if target != nil {
			sz := e.sizeOf(*target)
			return &cost.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(strFactor), ResultSize: &sz}
		}
	case "replace":
		if target != nil && len(args) >= 2 {
			return e.estimateReplace(*target, args[0], args[1])
		}
	case "split":
		if target != nil {
			sz := e.sizeOf(*target)
			// At worst the separator is "" and every character is an element.
			limit := sz.Max
			if len(args) > 1 {
				if lit := args[1].Expr(); lit != nil && lit.Kind() == ast.LiteralKind {
					if i, ok := lit.AsLiteral().(types.Int); ok {
						limit = uint64(i)
					}
				}
			}
			return &cost.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(2 * strFactor), ResultSize: &cost.SizeEstimate{Min: 0, Max: limit}}
		}
	case "join":
		if target != nil {
			var sz cost.SizeEstimate
			listSize := e.sizeOf(*target)
			if el := e.listElementNode(*target); el != nil {
				sz = listSize.Multiply(e.sizeOf(el))
			}
			if len(args) > 0 {
				var seps cost.SizeEstimate
				if listSize.Min > 0 {
					seps.Min = listSize.Min - 1
				}
				if listSize.Max > 0 {
					seps.Max = listSize.Max - 1
				}
				sz = sz.Add(e.sizeOf(args[0]).Multiply(seps))
			}
			return &cost.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(strFactor), ResultSize: &sz}
		}
	case "find", "findAll":
		if target != nil && len(args) >= 1 {
			sz := e.sizeOf(*target)
			strCost := sz.Add(cost.FixedSizeEstimate(1)).MultiplyByCostFactor(strFactor)
			reCost := e.sizeOf(args[0]).MultiplyByCostFactor(cost.RegexStringLengthCostFactor)
			return &cost.CallEstimate{CostEstimate: strCost.Multiply(reCost), ResultSize: &cost.SizeEstimate{Min: 0, Max: sz.Max}}
		}
	case "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		if len(args) >= 1 {
			return &cost.CallEstimate{CostEstimate: e.sizeOf(args[0]).MultiplyByCostFactor(strFactor)}
		}
	case "ip":
		if overloadID == "cidr_ip" {
			return costEstimate(1, 1)
		}
		if len(args) >= 1 {
			return &cost.CallEstimate{CostEstimate: e.sizeOf(args[0]).MultiplyByCostFactor(strFactor)}
		}
	case "ip.isCanonical":
		if len(args) >= 1 {
			return &cost.CallEstimate{CostEstimate: e.sizeOf(args[0]).MultiplyByCostFactor(2 * strFactor)}
		}
	case "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast",
		"format.named", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub",
		"major", "minor", "patch", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery":
		return costEstimate(1, 1)
	case "containsIP", "containsCIDR":
		if len(args) >= 1 {
			// Addresses are 4 or 16 bytes long.
			sz := cost.SizeEstimate{Min: 4, Max: 16}
			c := sz.Add(sz).MultiplyByCostFactor(strFactor)
			if function == "containsCIDR" {
				c = c.Add(sz.MultiplyByCostFactor(strFactor)).Add(cost.CostEstimate{Min: 1, Max: 1})
			}
			if overloadID == "cidr_contains_ip_string" || overloadID == "cidr_contains_cidr_string" {
				c = c.Add(e.sizeOf(args[0]).MultiplyByCostFactor(strFactor))
			}
			return &cost.CallEstimate{CostEstimate: c}
		}
	case "validate":
		if len(args) >= 1 {
			return &cost.CallEstimate{CostEstimate: e.sizeOf(args[0]).MultiplyByCostFactor(strFactor).
				MultiplyByCostFactor(k8sMaxNameFormatRegexSize * cost.RegexStringLengthCostFactor)}
		}
	case "_==_":
		if len(args) == 2 && args[0].Type().Equal(args[1].Type()) == types.True {
			switch t := args[0].Type(); t.TypeName() {
			case k8sIPType.TypeName(), k8sCIDRType.TypeName(), K8sQuantityType.TypeName(), k8sSemverType.TypeName():
				return costEstimate(1, 1)
			case k8sFormatType.TypeName():
				return &cost.CallEstimate{CostEstimate: cost.CostEstimate{Min: 1, Max: k8sMaxFormatSize}.MultiplyByCostFactor(strFactor)}
			case k8sURLType.TypeName():
				size := cost.SizeEstimate{Min: 1, Max: 1}
				if rh := args[1].ComputedSize(); rh != nil {
					size = rh.Union(*rh)
				}
				return &cost.CallEstimate{CostEstimate: cost.CostEstimate{Min: 1, Max: size.Max}.MultiplyByCostFactor(strFactor)}
			}
		}
	default:
		if strings.HasPrefix(function, "format.") {
			if _, ok := k8sFormats[strings.TrimPrefix(function, "format.")]; ok {
				return costEstimate(1, 1)
			}
		}
	}
	return nil
}

// estimateReplace is the estimate of s.replace(old, new): the cost of
// walking s twice and the longest and shortest possible results.
func (e *CostEstimator) estimateReplace(target, oldNode, newNode cost.AstNode) *cost.CallEstimate {
	sz, oldSz, newSz := e.sizeOf(target), e.sizeOf(oldNode), e.sizeOf(newNode)
	var count, retained cost.SizeEstimate
	switch {
	case oldSz.Min == 0:
		// Replacing "" puts the replacement around every character.
		count.Max = sz.Max
		if sz.Max < math.MaxUint64 {
			count.Max++
		}
		retained.Max = sz.Max
	case newSz.Max <= oldSz.Min:
		retained.Max = sz.Max
	default:
		count.Max = uint64(math.Ceil(float64(sz.Max) / float64(oldSz.Min)))
	}
	switch {
	case oldSz.Max == 0:
		count.Min = sz.Min
		if sz.Min < math.MaxUint64 {
			count.Min++
		}
		retained.Min = sz.Min
	case oldSz.Max <= newSz.Min:
		retained.Min = sz.Min
	default:
		count.Min = uint64(math.Ceil(float64(sz.Min) / float64(oldSz.Max)))
	}
	size := count.Multiply(newSz).Add(retained)
	return &cost.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(2 * cost.StringTraversalCostFactor), ResultSize: &size}
}
