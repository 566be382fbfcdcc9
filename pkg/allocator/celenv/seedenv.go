package celenv

import (
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// The seed environment's variables: one map per attribute type, keyed by
// attribute name, holding the instance's effective attributes of that
// type.
const (
	VarQuantities   = "quantities"
	VarBools        = "bools"
	VarInts         = "ints"
	VarIntSlices    = "intslices"
	VarStrings      = "strings"
	VarStringSlices = "stringslices"
	VarVersions     = "versions"
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

// SeedEnv returns the seed's selector environment (seed 002): the
// variables above, quantity() and semver(), and the comparison operators
// on quantities and versions against their own type and strings (a
// string literal on the left is moved to the right by a macro). It is
// built once and shared; cel.Env is safe for concurrent use.
func SeedEnv() (*cel.Env, error) { return seedEnv() }

var seedEnv = sync.OnceValues(newSeedEnv)

func newSeedEnv() (*cel.Env, error) {
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
			[]*cel.Type{cel.StringType}, QuantityType, cel.UnaryBinding(QuantityOf))),
		cel.Function("semver", cel.Overload("semver_string",
			[]*cel.Type{cel.StringType}, SemverType, cel.UnaryBinding(SemverOf))),
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
		WarmChecker(env)
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

// CheckSeedLiterals parses string literals that will be read as quantities or
// versions, so that `quantities["memory"] >= "8Gx"` is rejected at
// admission instead of failing against every instance.
func CheckSeedLiterals(a *ast.AST) error {
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
	parse := ParseQuantityLiteral
	if t.IsExactType(SemverType) {
		parse = ParseSemverLiteral
	}
	v := parse(string(s))
	if err, isErr := v.(*types.Err); isErr {
		loc := a.SourceInfo().GetStartLocation(args[i].ID())
		return fmt.Errorf("%d:%d: %w", loc.Line(), loc.Column()+1, err)
	}
	return nil
}

// SeedSizeEstimator gives the seed environment's static cost estimate the
// size assumptions above.
type SeedSizeEstimator struct{}

func (SeedSizeEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
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

func (SeedSizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// WarmChecker makes env's type checker build the lazy parts it would
// otherwise build in the first compilation that needs them: cel-go
// (v0.33) fills its symbol catalog, under a sync.Once, the first time an
// expression names an undeclared identifier, while concurrent
// compilations copy that field unguarded when they enter a comprehension
// (a data race the race detector reports when selectors compile in
// parallel, as the API server's validation does). Compiling one
// expression with an undeclared name before the environment is shared
// fills it once, before every other use. Both environments of this
// package are warmed; a caller building its own environment on them
// calls it before sharing the environment.
func WarmChecker(env *cel.Env) {
	_, _ = env.Compile("allot_warm_up_undeclared_name")
}
