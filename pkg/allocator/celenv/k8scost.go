package celenv

// Upstream's prices for the Kubernetes library functions.

import (
	"math"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

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
