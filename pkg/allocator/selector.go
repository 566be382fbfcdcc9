package allocator

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"allot.dev/allot/pkg/allocator/celenv"
	"cel.dev/cel-go/cel"
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

// The selector variables: one map per attribute type, keyed by attribute
// name, holding the instance's effective attributes of that type.
const (
	VarQuantities   = celenv.VarQuantities
	VarBools        = celenv.VarBools
	VarInts         = celenv.VarInts
	VarIntSlices    = celenv.VarIntSlices
	VarStrings      = celenv.VarStrings
	VarStringSlices = celenv.VarStringSlices
	VarVersions     = celenv.VarVersions
)

// ErrInvalidSelector is wrapped by every error CompileSelector and
// CompileDeviceSelector return (celenv.ErrInvalidSelector).
var ErrInvalidSelector = celenv.ErrInvalidSelector

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
	env, err := celenv.SeedEnv()
	if err != nil {
		return nil, fmt.Errorf("create CEL environment: %w", err)
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSelector, celenv.IssueSummary(iss))
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("%w: must return bool, not %s", ErrInvalidSelector, checked.OutputType())
	}
	if err := celenv.CheckSeedLiterals(checked.NativeRep()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSelector, err)
	}
	est, err := env.EstimateCost(checked, celenv.SeedSizeEstimator{})
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
