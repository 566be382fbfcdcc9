package celenv

// The Kubernetes CEL function libraries that the resource.k8s.io/v1 device
// selector environment enables (k8s.io/apiserver/pkg/cel/library), written
// for cel.dev/cel-go: quantity, semver, regex (find, findAll), URLs, IP and
// CIDR addresses, named formats and the Kubernetes list functions, each with
// upstream's function names, overload IDs, types, results and errors, and
// the upstream cost estimator's prices for them. pkg/allocator/engine's selector.go
// builds the environment on them.

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
