package celenv

// The implementations of the Kubernetes library functions K8sLibrary
// declares.

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
