package allocator

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"allot.dev/allot/pkg/allocator/celenv"
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Limits on selectors, checked by CompileSelector (and so by admission) and
// again at run time.
const (
	// MaxSelectorLength is the longest selector accepted, in bytes.
	MaxSelectorLength = 10 * 1024
	// SelectorCostLimit bounds both the static cost estimate of a selector
	// and the actual cost of one evaluation against one instance, in CEL
	// cost units.
	SelectorCostLimit = 1_000_000
)

// Size assumptions for the static cost estimate: an instance is assumed to
// have at most this many attributes of one type, slices at most this many
// elements and strings at most this many bytes. Larger instances are still
// safe: the runtime cost limit applies to every evaluation.
const (
	estimateMaxAttributes = 128
	estimateMaxListLength = 128
	estimateMaxString     = 256
)

// The selector variables: one map per attribute type, keyed by attribute
// name, holding the instance's effective attributes of that type.
const (
	VarQuantities   = "quantities"
	VarBools        = "bools"
	VarInts         = "ints"
	VarIntSlices    = "intslices"
	VarStrings      = "strings"
	VarStringSlices = "stringslices"
	VarVersions     = "versions"
)

// ErrInvalidSelector is wrapped by every error CompileSelector returns.
var ErrInvalidSelector = errors.New("invalid selector")

// comparisonOps are the operators with quantity and version overloads.
// Equality with a string is not among them: CEL's == is declared for
// operands of one type, so write quantities["memory"] == quantity("16Gi").
var comparisonOps = []string{
	operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals,
}

var opNames = map[string]string{
	operators.Less: "less", operators.LessEquals: "less_equals", operators.Greater: "greater",
	operators.GreaterEquals: "greater_equals",
}

// flipped is the operator that gives the same result with swapped operands.
var flipped = map[string]string{
	operators.Less: operators.Greater, operators.LessEquals: operators.GreaterEquals,
	operators.Greater: operators.Less, operators.GreaterEquals: operators.LessEquals,
}

var selectorEnv = sync.OnceValues(newSelectorEnv)

func newSelectorEnv() (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Types(QuantityType, SemverType),
		cel.Variable(VarQuantities, cel.MapType(cel.StringType, QuantityType)),
		cel.Variable(VarBools, cel.MapType(cel.StringType, cel.BoolType)),
		cel.Variable(VarInts, cel.MapType(cel.StringType, cel.IntType)),
		cel.Variable(VarIntSlices, cel.MapType(cel.StringType, cel.ListType(cel.IntType))),
		cel.Variable(VarStrings, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarStringSlices, cel.MapType(cel.StringType, cel.ListType(cel.StringType))),
		cel.Variable(VarVersions, cel.MapType(cel.StringType, SemverType)),
		cel.Function("quantity", cel.Overload("quantity_string",
			[]*cel.Type{cel.StringType}, QuantityType, cel.UnaryBinding(celenv.QuantityOf))),
		cel.Function("semver", cel.Overload("semver_string",
			[]*cel.Type{cel.StringType}, SemverType, cel.UnaryBinding(celenv.SemverOf))),
	}
	// The standard comparison operators dispatch at run time through
	// traits.Comparer (and ref.Val.Equal) on the left operand, so declaring
	// the overloads for the type checker is enough. A string literal on the
	// left is moved to the right by a macro, so "8Gi" <= quantities["memory"]
	// works too.
	var macros []cel.Macro
	for _, op := range comparisonOps {
		var overloads []cel.FunctionOpt
		for _, t := range []*cel.Type{QuantityType, SemverType} {
			name := opNames[op] + "_" + strings.ToLower(strings.TrimPrefix(t.TypeName(), "allot."))
			overloads = append(overloads,
				cel.Overload(name, []*cel.Type{t, t}, cel.BoolType),
				cel.Overload(name+"_string", []*cel.Type{t, cel.StringType}, cel.BoolType))
		}
		opts = append(opts, cel.Function(op, overloads...))
		macros = append(macros, cel.GlobalMacro(op, 2, swapStringLiteral(flipped[op])))
	}
	opts = append(opts, cel.Macros(macros...))
	env, err := cel.NewEnv(opts...)
	if err == nil {
		warmCELChecker(env)
	}
	return env, err
}

func swapStringLiteral(flippedOp string) cel.MacroFactory {
	return func(eh cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
		if args[0].Kind() != ast.LiteralKind || args[1].Kind() == ast.LiteralKind {
			return nil, nil
		}
		if _, ok := args[0].AsLiteral().(types.String); !ok {
			return nil, nil
		}
		return eh.NewCall(flippedOp, args[1], args[0]), nil
	}
}

// CompileSelector checks a selector as the allocator will run it: it must
// parse, type-check as bool against the selector variables, use valid
// quantity and version literals, stay under MaxSelectorLength and have a
// static cost estimate under SelectorCostLimit. The error wraps
// ErrInvalidSelector and says where the problem is. Results are cached, so
// calling it for every admitted object is cheap.
func CompileSelector(expr string) error {
	_, err := compileSelector(expr)
	return err
}

// compileSelector returns the cached compiled form of expr.
func compileSelector(expr string) (*selector, error) {
	if e, ok := selectorCache.get(expr); ok {
		return e.sel, e.err
	}
	sel, err := compileUncached(expr)
	selectorCache.add(expr, cacheEntry{sel: sel, err: err})
	return sel, err
}

func compileUncached(expr string) (*selector, error) {
	if len(expr) > MaxSelectorLength {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrInvalidSelector, len(expr), MaxSelectorLength)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSelector)
	}
	env, err := selectorEnv()
	if err != nil {
		return nil, fmt.Errorf("create CEL environment: %w", err)
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSelector, issueSummary(iss))
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("%w: must return bool, not %s", ErrInvalidSelector, checked.OutputType())
	}
	if err := checkLiterals(checked.NativeRep()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSelector, err)
	}
	est, err := env.EstimateCost(checked, sizeEstimator{})
	if err != nil {
		return nil, fmt.Errorf("%w: estimate cost: %w", ErrInvalidSelector, err)
	}
	if est.Max > SelectorCostLimit {
		return nil, fmt.Errorf("%w: estimated cost %d exceeds the limit of %d; simplify the expression",
			ErrInvalidSelector, est.Max, SelectorCostLimit)
	}
	prog, err := env.Program(checked, cel.CostLimit(SelectorCostLimit))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSelector, err)
	}
	return &selector{src: expr, prog: prog, estimate: est.Max}, nil
}

// checkLiterals parses string literals that will be read as quantities or
// versions, so that `quantities["memory"] >= "8Gx"` is rejected at
// admission instead of failing against every instance.
func checkLiterals(a *ast.AST) error {
	calls := ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.CallKind))
	for _, c := range calls {
		call := c.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case "quantity":
			if err := checkLiteral(a, args, 0, QuantityType); err != nil {
				return err
			}
		case "semver":
			if err := checkLiteral(a, args, 0, SemverType); err != nil {
				return err
			}
		case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
			if len(args) != 2 {
				continue
			}
			for i := range 2 {
				t := a.GetType(args[1-i].ID())
				if t == nil || (!t.IsExactType(QuantityType) && !t.IsExactType(SemverType)) {
					continue
				}
				if err := checkLiteral(a, args, i, t); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkLiteral(a *ast.AST, args []ast.Expr, i int, t *cel.Type) error {
	if i >= len(args) || args[i].Kind() != ast.LiteralKind {
		return nil
	}
	s, ok := args[i].AsLiteral().(types.String)
	if !ok {
		return nil
	}
	parse := celenv.ParseQuantityLiteral
	if t.IsExactType(SemverType) {
		parse = celenv.ParseSemverLiteral
	}
	v := parse(string(s))
	if err, isErr := v.(*types.Err); isErr {
		loc := a.SourceInfo().GetStartLocation(args[i].ID())
		return fmt.Errorf("%d:%d: %w", loc.Line(), loc.Column()+1, err)
	}
	return nil
}

// sizeEstimator gives the static cost estimate the size assumptions above.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	var sz cost.SizeEstimate
	switch {
	case len(path) == 1:
		sz = cost.RangedSizeEstimate(0, estimateMaxAttributes)
	case len(path) == 2 && (path[0] == VarIntSlices || path[0] == VarStringSlices):
		sz = cost.RangedSizeEstimate(0, estimateMaxListLength)
	default:
		sz = cost.RangedSizeEstimate(0, estimateMaxString)
	}
	return &sz
}

func (sizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// selector is a compiled selector, safe for concurrent use.
type selector struct {
	src      string
	prog     cel.Program
	estimate uint64

	clausesOnce sync.Once
	clauses     []*selector
}

// outcome is the result of evaluating a selector against one instance.
type outcome uint8

const (
	outcomeTrue outcome = iota
	outcomeFalse
	outcomeMissing // an attribute the selector reads is absent
	outcomeCost    // the runtime cost limit was hit
	outcomeError   // any other evaluation error
)

func (s *selector) eval(vars *attrVars) outcome {
	out, _, err := s.prog.Eval(vars)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		switch {
		// cel-go reports a missing map key as a plain error with this
		// text; there is no sentinel to match.
		case strings.HasPrefix(err.Error(), "no such key"):
			return outcomeMissing
		case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
			return outcomeCost
		}
		return outcomeError
	}
	if out == types.True {
		return outcomeTrue
	}
	return outcomeFalse
}

// conjuncts returns the selector's top-level && clauses, compiled, for
// explaining which clause rejected an instance. A selector that is not a
// plain conjunction is its own only clause.
func (s *selector) conjuncts() []*selector {
	s.clausesOnce.Do(func() {
		s.clauses = []*selector{s}
		parts := splitConjuncts(s.src)
		if len(parts) < 2 {
			return
		}
		clauses := make([]*selector, 0, len(parts))
		for _, p := range parts {
			c, err := compileSelector(p)
			if err != nil {
				return
			}
			clauses = append(clauses, c)
		}
		s.clauses = clauses
	})
	return s.clauses
}

// Bounds of a compile error's text: CEL's own text quotes the offending
// source line, which for a long one-line selector is the whole selector.
const (
	maxReportedIssues   = 3
	maxIssueMessageSize = 256
)

// issueSummary lists where and why a selector does not compile, without
// quoting its source: at most maxReportedIssues issues, each cut to
// maxIssueMessageSize bytes.
func issueSummary(iss *cel.Issues) string {
	errs := iss.Errors()
	parts := make([]string, 0, min(len(errs), maxReportedIssues)+1)
	for i, e := range errs {
		if i == maxReportedIssues {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-i))
			break
		}
		msg := e.Message
		if len(msg) > maxIssueMessageSize {
			msg = strings.ToValidUTF8(msg[:maxIssueMessageSize], "") + "..."
		}
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", loc.Line(), loc.Column()+1, msg)
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}
