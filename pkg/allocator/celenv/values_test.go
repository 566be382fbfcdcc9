package celenv

import (
	"strconv"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestQuantityParsedOnce checks that both environments parse quantity
// strings with the one bounded parser: the same literals are refused,
// each environment with its own words, and accepted ones compare alike.
func TestQuantityParsedOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		in       string
		seed, v1 string // error substrings; "" accepts
	}{
		"plain":         {in: "8Gi"},
		"exponent ok":   {in: "1e100"},
		"syntax":        {in: "8Gx", seed: `invalid quantity "8Gx"`, v1: "quantities must match"},
		"long":          {in: strings.Repeat("1", 65), seed: "longer than 64 characters", v1: "quantities of this form are not supported: longer than 64 characters"},
		"long exponent": {in: "1e1000", seed: "exponent 1000 has more than 3 digits", v1: "quantities of this form are not supported: exponent 1000"},
	} {
		seed, v1 := ParseQuantityLiteral(tc.in), parseK8sQuantity(tc.in)
		for _, c := range []struct {
			env  string
			v    ref.Val
			want string
		}{{"seed", seed, tc.seed}, {"v1", v1, tc.v1}} {
			err, isErr := c.v.(*types.Err)
			switch {
			case c.want == "" && isErr:
				t.Errorf("%s: %s environment refused %q: %v", name, c.env, tc.in, err)
			case c.want != "" && (!isErr || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s: %s environment gave %v for %q, want an error containing %q", name, c.env, c.v, tc.in, c.want)
			}
		}
		if tc.seed != "" {
			continue
		}
		q, _ := QuantityValue(seed)
		q1 := v1.(k8sQuantity).q
		if want := resource.MustParse(tc.in); q.Cmp(want) != 0 || q1.Cmp(want) != 0 {
			t.Errorf("%s: parsed %v and %v, want %v", name, &q, &q1, &want)
		}
	}
}

// TestLiteralCacheBounded checks that the one literal cache stops growing
// at its bound and still answers beyond it.
func TestLiteralCacheBounded(t *testing.T) {
	var c literalCache
	for i := range literalCacheMax + 10 {
		if v := c.get(strconv.Itoa(i), ParseQuantityLiteral); types.IsError(v) {
			t.Fatalf("literal %d: %v", i, v)
		}
	}
	if n := c.n.Load(); n != literalCacheMax {
		t.Errorf("cache holds %d entries, want %d", n, literalCacheMax)
	}
	if v := c.get("bad", ParseQuantityLiteral); !types.IsError(v) {
		t.Errorf("bad literal: got %v, want an error", v)
	}
	if _, ok := c.m.Load("bad"); ok {
		t.Error("an error was cached")
	}
}
