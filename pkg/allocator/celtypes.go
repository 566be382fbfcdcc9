package allocator

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

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

// literalCache remembers parsed string operands so that a selector such as
// `quantities["memory"] >= "8Gi"` parses "8Gi" once, not once per instance.
// It stops growing at literalCacheMax entries; strings beyond that are
// parsed each time.
type literalCache struct {
	mu sync.RWMutex
	m  map[string]ref.Val
}

const literalCacheMax = 4096

var quantityLiterals, versionLiterals = &literalCache{m: map[string]ref.Val{}}, &literalCache{m: map[string]ref.Val{}}

func (c *literalCache) get(s string, parse func(string) ref.Val) ref.Val {
	c.mu.RLock()
	v, ok := c.m[s]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = parse(s)
	if types.IsError(v) {
		return v
	}
	c.mu.Lock()
	if len(c.m) < literalCacheMax {
		c.m[s] = v
	}
	c.mu.Unlock()
	return v
}

// maxQuantityLiteral bounds the length of a quantity literal, and
// maxQuantityExponent the digits of its exponent: parsing and comparing
// quantities costs time that grows with the exponent (1e-99999999 takes
// minutes), and selectors are written by users.
const (
	maxQuantityLiteral  = 64
	maxQuantityExponent = 3
)

// checkQuantityLiteral refuses literals that would be slow to parse.
func checkQuantityLiteral(s string) error {
	if len(s) > maxQuantityLiteral {
		return fmt.Errorf("longer than %d characters", maxQuantityLiteral)
	}
	if i := strings.LastIndexAny(s, "eE"); i >= 0 {
		exp := strings.TrimLeft(s[i+1:], "+-")
		if len(exp) > maxQuantityExponent && strings.Trim(exp, "0123456789") == "" {
			return fmt.Errorf("exponent %s has more than %d digits", s[i+1:], maxQuantityExponent)
		}
	}
	return nil
}

func parseQuantityVal(s string) ref.Val {
	if err := checkQuantityLiteral(s); err != nil {
		return types.NewErr("invalid quantity %q: %v", s, err)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return types.NewErr("invalid quantity %q: %v", s, err)
	}
	return quantityVal{q: q}
}

func parseSemverVal(s string) ref.Val {
	v, err := semver.ParseTolerant(s)
	if err != nil {
		return types.NewErr("invalid version %q: %v", s, err)
	}
	return semverVal{v: v}
}

// quantityOf and semverOf are the quantity() and semver() constructors.
func quantityOf(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	return quantityLiterals.get(string(s), parseQuantityVal)
}

func semverOf(arg ref.Val) ref.Val {
	s, ok := arg.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	return versionLiterals.get(string(s), parseSemverVal)
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
		p := quantityLiterals.get(string(o), parseQuantityVal)
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
		p := versionLiterals.get(string(o), parseSemverVal)
		if pv, ok := p.(semverVal); ok {
			return types.Int(v.v.Compare(pv.v))
		}
		return p
	}
	return types.MaybeNoSuchOverloadErr(other)
}
