package allocator

import (
	"errors"
	"slices"
	"strings"
	"testing"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// testVars is an instance with one attribute of every type.
func testVars(t testing.TB) *attrVars {
	t.Helper()
	vars, err := newAttrVars(attrSet{
		"memory":   {Quantity: ptr(resource.MustParse("16Gi"))},
		"ecc":      {Bool: ptr(true)},
		"cores":    {Int: ptr(int64(80))},
		"numa":     {IntSlice: &[]int64{0, 1}},
		"model":    {String: ptr("A4")},
		"features": {StringSlice: &[]string{"mig", "nvlink"}},
		"runtime":  {Version: ptr(" v11.1.42 ")},
		"firmware": {Version: ptr("v2.03")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

func TestSelectorEval(t *testing.T) {
	vars := testVars(t)
	tests := map[string]struct {
		expr string
		want outcome
	}{
		"quantity >= string":          {`quantities["memory"] >= "8Gi"`, outcomeTrue},
		"quantity >= bigger string":   {`quantities["memory"] >= "17Gi"`, outcomeFalse},
		"quantity other notation":     {`quantities["memory"] <= "17179869184"`, outcomeTrue},
		"string on the left":          {`"8Gi" <= quantities["memory"]`, outcomeTrue},
		"string on the left, false":   {`"32Gi" < quantities["memory"]`, outcomeFalse},
		"quantity equality":           {`quantities["memory"] == quantity("16384Mi")`, outcomeTrue},
		"quantity vs quantity":        {`quantities["memory"] > quantity("1Gi")`, outcomeTrue},
		"version >= string":           {`versions["runtime"] >= "v11.0.0"`, outcomeTrue},
		"version below":               {`versions["runtime"] >= "v12.0.0"`, outcomeFalse},
		"version tolerant major only": {`versions["runtime"] < "v12"`, outcomeTrue},
		"version leading zeros":       {`versions["firmware"] == semver("2.3.0")`, outcomeTrue},
		"version string on the left":  {`"11.1.41" < versions["runtime"]`, outcomeTrue},
		"bools":                       {`bools["ecc"]`, outcomeTrue},
		"ints":                        {`ints["cores"] > 64`, outcomeTrue},
		"intslices":                   {`1 in intslices["numa"] && size(intslices["numa"]) == 2`, outcomeTrue},
		"strings":                     {`strings["model"].startsWith("A")`, outcomeTrue},
		"stringslices":                {`"mig" in stringslices["features"]`, outcomeTrue},
		"missing key":                 {`quantities["nope"] >= "1"`, outcomeMissing},
		"missing key in a false and":  {`ints["nope"] > 1 && false`, outcomeFalse},
		"has on missing":              {`has(quantities.nope) && quantities.nope >= "1"`, outcomeFalse},
		"in on missing":               {`"nope" in quantities`, outcomeFalse},
		"runtime error":               {`ints["cores"] / (ints["cores"] - 80) > 0`, outcomeError},
		"bad runtime quantity string": {`quantities["memory"] >= strings["model"]`, outcomeError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sel, err := compileSelector(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := sel.eval(vars); got != tc.want {
				t.Errorf("eval(%s) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
}

func TestCompileSelectorErrors(t *testing.T) {
	tests := map[string]struct {
		expr string
		want string // substring of the error
	}{
		"syntax error with position": {`quantities["memory"] >= `, "1:"},
		"not bool":                   {`ints["cores"] + 1`, "must return bool"},
		"unknown variable":           {`memory >= "8Gi"`, "undeclared reference"},
		"no quantity vs int":         {`quantities["memory"] >= 8`, "no matching overload"},
		"bad quantity literal":       {`quantities["memory"] >= "8Gx"`, `1:25: invalid quantity "8Gx"`},
		"bad quantity on the left":   {`"8Gx" <= quantities["memory"]`, `invalid quantity "8Gx"`},
		"bad version literal":        {`versions["v"] >= "twelve"`, `invalid version "twelve"`},
		"bad constructor literal":    {`quantity("lots") > quantities["m"]`, `invalid quantity "lots"`},
		"empty":                      {`  `, "empty"},
		"too long":                   {strings.Repeat("true && ", MaxSelectorLength/8+1) + "true", "more than the limit"},
		"too expensive": {`stringslices.all(a, stringslices.all(b, stringslices.all(c, stringslices[a].all(x, stringslices[b].all(y, x + y == c)))))`,
			"exceeds the limit"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CompileSelector(tc.expr)
			if err == nil {
				t.Fatalf("CompileSelector(%q) succeeded", tc.expr)
			}
			if !errors.Is(err, ErrInvalidSelector) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want ErrInvalidSelector containing %q", err, tc.want)
			}
		})
	}
}

func TestSplitConjuncts(t *testing.T) {
	tests := map[string]struct {
		expr string
		want []string
	}{
		"seed":         {`versions["runtimeVersion"] >= "v12.0.0" && quantities["memory"] >= "8Gi"`, []string{`versions["runtimeVersion"] >= "v12.0.0"`, `quantities["memory"] >= "8Gi"`}},
		"single":       {` a > 1 `, []string{`a > 1`}},
		"or on top":    {`a && b || c`, []string{`a && b || c`}},
		"ternary":      {`a ? b && c : d`, []string{`a ? b && c : d`}},
		"nested":       {`(a || b) && f(c && d)`, []string{`(a || b)`, `f(c && d)`}},
		"outer parens": {`(a && b)`, []string{`a`, `b`}},
		"inner parens": {`a && (b && c)`, []string{`a`, `b`, `c`}},
		"strings":      {`s["x && y"] == 'a || b' && t`, []string{`s["x && y"] == 'a || b'`, `t`}},
		"escapes":      {`s == "\" && " && t`, []string{`s == "\" && "`, `t`}},
		"raw string":   {`s == r"\" && t`, []string{`s == r"\"`, `t`}},
		"triple":       {`s == """a " && b""" && t`, []string{`s == """a " && b"""`, `t`}},
		"comment":      {"a // x && y\n && b", []string{"a // x && y", "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := splitConjuncts(tc.expr); !slices.Equal(got, tc.want) {
				t.Errorf("splitConjuncts(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	tests := map[string]string{
		"v12.0.0": "12.0.0", " 1.2 ": "1.2.0", "v12": "12.0.0", "01.02.03": "1.2.3", "1.2.3-rc.1": "1.2.3-rc.1",
	}
	for in, want := range tests {
		v, err := ParseVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	if _, err := ParseVersion("twelve"); err == nil {
		t.Error("ParseVersion(twelve) succeeded")
	}
}

func TestAttributeValueErrors(t *testing.T) {
	two := resourceapi.AttributeValue{Bool: ptr(true), Int: ptr(int64(1))}
	if _, err := newAttrVars(attrSet{"x": two}); err == nil {
		t.Error("attribute with two values accepted")
	}
	if _, err := newAttrVars(attrSet{"x": {}}); err == nil {
		t.Error("attribute without value accepted")
	}
	if _, err := newAttrVars(attrSet{"x": {Version: ptr("not-a-version")}}); err == nil {
		t.Error("bad version accepted")
	}
}

func TestSelectorCacheBounded(t *testing.T) {
	c := newLRU(2)
	for _, k := range []string{"a", "b", "a", "c"} {
		c.add(k, cacheEntry{})
	}
	if _, ok := c.get("b"); ok {
		t.Error("least recently used entry not evicted")
	}
	if _, ok := c.get("a"); !ok {
		t.Error("recently used entry evicted")
	}
}

// TestHugeQuantityExponentRefused: parsing such a literal would take
// minutes; the selector is refused at once, naming the literal.
func TestHugeQuantityExponentRefused(t *testing.T) {
	for _, expr := range []string{
		`quantities["memory"] >= "1e-99999999"`,
		`quantities["memory"] >= quantity("1E99999999")`,
		`quantities["memory"] >= "` + strings.Repeat("1", 100) + `"`,
	} {
		err := CompileSelector(expr)
		if err == nil || !strings.Contains(err.Error(), "invalid quantity") {
			t.Errorf("CompileSelector(%.60s) = %v, want an invalid quantity error", expr, err)
		}
	}
	if err := CompileSelector(`quantities["memory"] >= "1e3" && quantities["memory"] <= "16Gi"`); err != nil {
		t.Errorf("small exponent refused: %v", err)
	}
}
