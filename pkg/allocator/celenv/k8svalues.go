package celenv

// The Kubernetes CEL types and their values: quantity, semver, URL, IP,
// CIDR and named formats, with upstream's type names and errors.

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
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
