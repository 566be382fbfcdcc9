package validation

import (
	"fmt"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
)

// Reasons shared by several kinds.
const (
	msgImmutable = "field is immutable"
	msgNegative  = "must be greater than or equal to 0"
)

// omit hides a bulky value (a whole spec) from an error message.
var omit = field.OmitValueType{}

// invalidAll turns the messages of a name checker into errors at path.
func invalidAll(path *field.Path, value string, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func dnsSubdomain(path *field.Path, value string) field.ErrorList {
	return invalidAll(path, value, utilvalidation.IsDNS1123Subdomain(value))
}

func dnsLabel(path *field.Path, value string) field.ErrorList {
	return invalidAll(path, value, utilvalidation.IsDNS1123Label(value))
}

func qualifiedName(path *field.Path, value string) field.ErrorList {
	return invalidAll(path, value, content.IsLabelKey(value))
}

func labelValue(path *field.Path, value string) field.ErrorList {
	return invalidAll(path, value, content.IsLabelValue(value))
}

// required reports an empty value; otherwise it applies check.
func required(path *field.Path, value string, check func(*field.Path, string) field.ErrorList) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if check == nil {
		return nil
	}
	return check(path, value)
}

// optional applies check only to a non-empty value.
func optional(path *field.Path, value string, check func(*field.Path, string) field.ErrorList) field.ErrorList {
	if value == "" {
		return nil
	}
	return check(path, value)
}

// oneOf checks that exactly one of the named members of path is set. set
// lists the names of the members that are set.
func oneOf(path *field.Path, all, set []string) field.ErrorList {
	switch {
	case len(set) == 0:
		return field.ErrorList{field.Required(path, "must specify one of: "+quoteJoin(all))}
	case len(set) > 1:
		return field.ErrorList{field.Invalid(path, omit, "may specify only one of: "+quoteJoin(all)+"; found: "+quoteJoin(set))}
	}
	return nil
}

func quoteJoin(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = "`" + n + "`"
	}
	return strings.Join(parts, ", ")
}

// unique reports the second and later occurrences of a key among a list's
// items, at the path of the repeated item's key.
type unique struct {
	seen map[string]bool
}

func (u *unique) check(key string, path *field.Path) field.ErrorList {
	if u.seen == nil {
		u.seen = map[string]bool{}
	}
	if u.seen[key] {
		return field.ErrorList{field.Duplicate(path, key)}
	}
	u.seen[key] = true
	return nil
}

// immutable reports a change of a value that may not change after create.
func immutable(newVal, oldVal any, path *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(newVal, oldVal) {
		return nil
	}
	switch v := newVal.(type) {
	case string, bool, int32, int64:
		return field.ErrorList{field.Invalid(path, v, msgImmutable)}
	}
	return field.ErrorList{field.Invalid(path, omit, msgImmutable)}
}

func supported[T ~string](path *field.Path, value T, allowed ...T) field.ErrorList {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, string(value), allowed)}
}

func nonNegative(path *field.Path, value int64) field.ErrorList {
	if value < 0 {
		return field.ErrorList{field.Invalid(path, value, msgNegative)}
	}
	return nil
}

func nonNegativeQuantity(path *field.Path, q resource.Quantity) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(path, q.String(), msgNegative)}
	}
	return nil
}

// quantityInBounds refuses an amount of the named resource that allot
// cannot count in an int64 (see corev1.Amount): cpu above 2^63-1
// millicores, anything else above 2^63-1 units. Kubernetes checks only the
// sign; a larger amount there wraps around in the fit check.
func quantityInBounds(path *field.Path, name corev1.ResourceName, q resource.Quantity) field.ErrorList {
	if corev1.IsMilliResource(name) {
		if q.Cmp(corev1.MaxMilliQuantity) > 0 {
			return field.ErrorList{field.Invalid(path, q.String(), "must be at most 9223372036854775807m: cpu is counted in millicores in a 64-bit integer")}
		}
		return nil
	}
	if q.Cmp(corev1.MaxQuantity) > 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be at most 9223372036854775807 (2^63-1): amounts are counted in a 64-bit integer")}
	}
	return nil
}

// Bounds of what an error echoes back: a value the client sent, and the
// text of an error from a library (a CEL compiler) about it.
const (
	maxEchoedValue = 256
	maxEchoedError = 1024
)

// abbreviate cuts s to at most n bytes (on a UTF-8 boundary), saying how
// long it was.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + fmt.Sprintf("... (%d bytes)", len(s))
}

// isWholeNumber reports whether q has no fractional part.
func isWholeNumber(q resource.Quantity) bool {
	c := q.DeepCopy()
	return c.RoundUp(0)
}

func maxLen(path *field.Path, value string, limit int) field.ErrorList {
	if len(value) > limit {
		return field.ErrorList{field.TooLong(path, "", limit)}
	}
	return nil
}

func maxItems(path *field.Path, n, limit int) field.ErrorList {
	if n > limit {
		return field.ErrorList{field.TooMany(path, n, limit)}
	}
	return nil
}

// sortedKeys returns a map's keys in order, so errors come out in a stable
// order.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// unknownKind is the error for an object type this package does not know.
func unknownKind(obj any) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath("kind"), fmt.Sprintf("%T", obj), "allot has no validation for this type")}
}
