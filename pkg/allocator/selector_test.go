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

// TestCompileSelectorTooLong: the case of
// testdata/scenarios/seed-selectors.txt too long to write there.
func TestCompileSelectorTooLong(t *testing.T) {
	err := CompileSelector(strings.Repeat("true && ", MaxSelectorLength/8+1) + "true")
	if !errors.Is(err, ErrInvalidSelector) || err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("error %v, want ErrInvalidSelector with \"more than the limit\"", err)
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
