package celenv

import (
	"fmt"
	"reflect"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CEL types for the two attribute kinds that CEL has no type for. Both
// order (<, <=, >, >=) against their own kind and against strings, which
// are parsed on the fly: `quantities["memory"] >= "8Gi"`,
// `versions["runtimeVersion"] >= "v12.0.0"`. Equality (==, !=) is between
// values of one kind: `quantities["memory"] == quantity("16Gi")`.
var (
	// QuantityType is the CEL type of values in the quantities map and of
	// quantity("...").
	QuantityType = cel.ObjectType("allot.Quantity", traits.ComparerType)
	// SemverType is the CEL type of values in the versions map and of
	// semver("...").
	SemverType = cel.ObjectType("allot.Semver", traits.ComparerType)
)

// ParseVersion parses a semantic version tolerantly, as attribute values and
// selector literals are parsed: surrounding spaces and a "v" prefix are
// dropped, missing minor and patch numbers are 0 and leading zeros are
// removed ("v12" is 12.0.0, "1.02.3" is 1.2.3).
func ParseVersion(s string) (semver.Version, error) {
	v, err := semver.ParseTolerant(s)
	if err != nil {
		return semver.Version{}, fmt.Errorf("parse version %q: %w", s, err)
	}
	return v, nil
}

// NewQuantity returns q as an allot.Quantity value (a seed attribute).
func NewQuantity(q resource.Quantity) ref.Val { return quantityVal{q: q} }

// NewSemver returns v as an allot.Semver value (a seed attribute).
func NewSemver(v semver.Version) ref.Val { return semverVal{v: v} }

// QuantityValue and SemverValue return what an allot.Quantity or
// allot.Semver value holds, and false for other values.
func QuantityValue(v ref.Val) (resource.Quantity, bool) {
	q, ok := v.(quantityVal)
	return q.q, ok
}

func SemverValue(v ref.Val) (semver.Version, bool) {
	s, ok := v.(semverVal)
	return s.v, ok
}

// quantityVal is a resource.Quantity as a CEL value.
type quantityVal struct{ q resource.Quantity }

// semverVal is a semantic version as a CEL value.
type semverVal struct{ v semver.Version }

var (
	_ ref.Val         = quantityVal{}
	_ traits.Comparer = quantityVal{}
	_ ref.Val         = semverVal{}
	_ traits.Comparer = semverVal{}
)

// quantityLiterals and versionLiterals hold the seed environment's
// parsed string operands (see literalCache).
var quantityLiterals, versionLiterals literalCache

// maxQuantityLiteral bounds the length of a quantity literal, and
// maxQuantityExponent the digits of its exponent: parsing and comparing
// quantities costs time that grows with the exponent (1e-99999999 takes
// minutes), and selectors are written by users.
const (
	maxQuantityLiteral  = 64
	maxQuantityExponent = 3
)

// errSlowQuantity marks the quantities parseQuantity refuses because they
// would be slow to parse or compare (the upstream environment names them
// differently from a syntax error).
type errSlowQuantity struct{ msg string }

func (e *errSlowQuantity) Error() string { return e.msg }

// parseQuantity is resource.ParseQuantity for selector literals and
// attribute strings of both environments, refusing literals that would be
// slow to parse.
func parseQuantity(s string) (resource.Quantity, error) {
	if len(s) > maxQuantityLiteral {
		return resource.Quantity{}, &errSlowQuantity{fmt.Sprintf("longer than %d characters", maxQuantityLiteral)}
	}
	if i := strings.LastIndexAny(s, "eE"); i >= 0 {
		exp := strings.TrimLeft(s[i+1:], "+-")
		if len(exp) > maxQuantityExponent && strings.Trim(exp, "0123456789") == "" {
			return resource.Quantity{}, &errSlowQuantity{fmt.Sprintf("exponent %s has more than %d digits", s[i+1:], maxQuantityExponent)}
		}
	}
	return resource.ParseQuantity(s)
}

// ParseQuantityLiteral and ParseSemverLiteral parse a string operand of
// the seed environment as evaluation does (uncached), for checking
// literals at compile time; a failure is a CEL error value.
func ParseQuantityLiteral(s string) ref.Val {
	q, err := parseQuantity(s)
	if err != nil {
		return types.NewErr("invalid quantity %q: %v", s, err)
	}
	return quantityVal{q: q}
}

func ParseSemverLiteral(s string) ref.Val {
	v, err := semver.ParseTolerant(s)
	if err != nil {
		return types.NewErr("invalid version %q: %v", s, err)
	}
	return semverVal{v: v}
}

// QuantityOf and SemverOf are the seed environment's quantity() and
// semver() functions.
func QuantityOf(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	return quantityLiterals.get(string(s), ParseQuantityLiteral)
}

func SemverOf(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	return versionLiterals.get(string(s), ParseSemverLiteral)
}

// ConvertToNative implements ref.Val.
func (v quantityVal) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return v.q, nil
	case reflect.TypeFor[*resource.Quantity]():
		q := v.q.DeepCopy()
		return &q, nil
	case reflect.TypeFor[string]():
		return v.q.String(), nil
	}
	return nil, fmt.Errorf("cannot convert quantity to %v", t)
}

// ConvertToType implements ref.Val.
func (v quantityVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case QuantityType:
		return v
	case types.TypeType:
		return QuantityType
	case types.StringType:
		return types.String(v.q.String())
	}
	return types.NewErr("type conversion error from %s to %s", QuantityType, t)
}

// Equal implements ref.Val: equal amounts, whatever their notation.
func (v quantityVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(quantityVal)
	return types.Bool(ok && v.q.Cmp(o.q) == 0)
}

// Type implements ref.Val.
func (v quantityVal) Type() ref.Type { return QuantityType }

// Value implements ref.Val.
func (v quantityVal) Value() any { return v.q }

// Compare implements traits.Comparer.
func (v quantityVal) Compare(other ref.Val) ref.Val {
	switch o := other.(type) {
	case quantityVal:
		return types.Int(v.q.Cmp(o.q))
	case types.String:
		p := quantityLiterals.get(string(o), ParseQuantityLiteral)
		if pq, ok := p.(quantityVal); ok {
			return types.Int(v.q.Cmp(pq.q))
		}
		return p
	}
	return types.MaybeNoSuchOverloadErr(other)
}

// ConvertToNative implements ref.Val.
func (v semverVal) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[semver.Version]():
		return v.v, nil
	case reflect.TypeFor[string]():
		return v.v.String(), nil
	}
	return nil, fmt.Errorf("cannot convert semver to %v", t)
}

// ConvertToType implements ref.Val.
func (v semverVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case SemverType:
		return v
	case types.TypeType:
		return SemverType
	case types.StringType:
		return types.String(v.v.String())
	}
	return types.NewErr("type conversion error from %s to %s", SemverType, t)
}

// Equal implements ref.Val: equal precedence (build metadata is ignored).
func (v semverVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(semverVal)
	return types.Bool(ok && v.v.Compare(o.v) == 0)
}

// Type implements ref.Val.
func (v semverVal) Type() ref.Type { return SemverType }

// Value implements ref.Val.
func (v semverVal) Value() any { return v.v }

// Compare implements traits.Comparer.
func (v semverVal) Compare(other ref.Val) ref.Val {
	switch o := other.(type) {
	case semverVal:
		return types.Int(v.v.Compare(o.v))
	case types.String:
		p := versionLiterals.get(string(o), ParseSemverLiteral)
		if pv, ok := p.(semverVal); ok {
			return types.Int(v.v.Compare(pv.v))
		}
		return p
	}
	return types.MaybeNoSuchOverloadErr(other)
}
