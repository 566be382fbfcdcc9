package celenv

import (
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSeedEnv compiles and runs seed selectors in the environment alone:
// string operands on either side, bad literals caught at compile time.
func TestSeedEnv(t *testing.T) {
	env, err := SeedEnv()
	if err != nil {
		t.Fatal(err)
	}
	ver, _ := ParseVersion("11.1.42")
	vars := map[string]any{
		VarQuantities: map[string]any{"memory": NewQuantity(resource.MustParse("16Gi"))},
		VarVersions:   map[string]any{"runtime": NewSemver(ver)},
	}
	for expr, want := range map[string]string{
		`quantities["memory"] >= "8Gi"`:                               "true",
		`"32Gi" <= quantities["memory"]`:                              "false",
		`quantities["memory"] == quantity("16384Mi")`:                 "true",
		`versions["runtime"] >= "v11" && versions["runtime"] < "v12"`: "true",
		`quantities["memory"] >= "8Gx"`:                               `1:25: invalid quantity "8Gx"`,
		`semver("x.y") == versions["runtime"]`:                        `1:8: invalid version "x.y"`,
	} {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		if err := CheckSeedLiterals(ast.NativeRep()); err != nil {
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: %v, want %s", expr, err, want)
			}
			continue
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := out.ConvertToType(types.StringType).Value(); got != want {
			t.Errorf("%s = %v, want %s", expr, got, want)
		}
	}
	if _, err := env.EstimateCost(mustCompile(t, env, `quantities.all(k, k.size() < 10)`), SeedSizeEstimator{}); err != nil {
		t.Errorf("estimate: %v", err)
	}
}

func mustCompile(t *testing.T, env *cel.Env, expr string) *cel.Ast {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	return ast
}
