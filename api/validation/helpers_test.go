package validation

import (
	"strings"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// expectErrs is the one assertion of this package's tests: errs must hold
// exactly the wanted errors, in any order. A want is a field path,
// optionally followed by ": " and text the error's message must contain.
func expectErrs(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	remaining := append(field.ErrorList(nil), errs...)
	var missing []string
	for _, w := range want {
		path, text, _ := strings.Cut(w, ": ")
		found := -1
		for i, e := range remaining {
			if e.Field == path && strings.Contains(e.Error(), text) {
				found = i
				break
			}
		}
		if found < 0 {
			missing = append(missing, w)
			continue
		}
		remaining = append(remaining[:found], remaining[found+1:]...)
	}
	if len(missing) > 0 || len(remaining) > 0 {
		t.Errorf("errors do not match\nmissing:    %q\nunexpected: %s\nall:        %s", missing, describe(remaining), describe(errs))
	}
}

func describe(errs field.ErrorList) string {
	if len(errs) == 0 {
		return "none"
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return "\n  " + strings.Join(parts, "\n  ")
}

// rl builds a resource list from "name=quantity" pairs.
func rl(pairs ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for _, p := range pairs {
		name, q, _ := strings.Cut(p, "=")
		list[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	return list
}

func ptr[T any](v T) *T { return &v }

func TestHelpers(t *testing.T) {
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"oneOf none names all members": {
			errs: oneOf(field.NewPath("x"), []string{"a", "b"}, nil),
			want: []string{"x: must specify one of: `a`, `b`"},
		},
		"oneOf two lists what is set": {
			errs: oneOf(field.NewPath("x"), []string{"a", "b", "c"}, []string{"a", "c"}),
			want: []string{"x: found: `a`, `c`"},
		},
		"oneOf exactly one":  {errs: oneOf(field.NewPath("x"), []string{"a", "b"}, []string{"b"})},
		"immutable string":   {errs: immutable("a", "b", field.NewPath("x")), want: []string{`x: Invalid value: "a": field is immutable`}},
		"immutable struct":   {errs: immutable(corev1.Taint{Key: "a"}, corev1.Taint{}, field.NewPath("x")), want: []string{"x: Invalid value: field is immutable"}},
		"immutable nil==[]":  {errs: immutable([]string(nil), []string{}, field.NewPath("x"))},
		"negative quantity":  {errs: nonNegativeQuantity(field.NewPath("q"), resource.MustParse("-1")), want: []string{"q"}},
		"max items exceeded": {errs: maxItems(field.NewPath("l"), 3, 2), want: []string{"l: must have at most 2 items"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
	for q, whole := range map[string]bool{"1": true, "1000m": true, "1.5": false, "500m": false, "2k": true, "1e3": true} {
		if got := isWholeNumber(resource.MustParse(q)); got != whole {
			t.Errorf("isWholeNumber(%s) = %v, want %v", q, got, whole)
		}
	}
}
