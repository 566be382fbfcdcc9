// Package celenv holds the CEL values and function libraries of allot's
// two device-selector environments, once for both: the seed's (seed 002:
// `quantities`, `versions`, ... maps, with allot.Quantity and
// allot.Semver, which order against strings) and resource.k8s.io/v1's
// (upstream's `device` variable with the Kubernetes libraries: quantity,
// semver, regex, URL, IP, CIDR, named formats, lists, and upstream's cost
// prices). One bounded quantity parser, one literal cache and one
// comparison serve both; each environment keeps its own CEL type names
// because the expressions users write name them.
//
// The package is pure: no I/O, no goroutines; its only state is the
// bounded caches of parsed literals (safe for concurrent use). Values it
// returns are immutable.
//
// A caller building an environment (pkg/allocator's selector.go and
// selectorv1.go) does, in order:
//
//  1. declares the types and functions: QuantityType, SemverType,
//     QuantityOf and SemverOf for the seed environment; K8sLibrary for
//     the v1 one;
//  2. checks string literals at compile time with ParseQuantityLiteral
//     and ParseSemverLiteral (seed) — a bad literal is the user's error,
//     reported before any device is evaluated;
//  3. builds attribute values with NewQuantity and NewSemver (seed) or
//     NewK8sQuantity and K8sVersion (v1), and reads them back with
//     QuantityValue and SemverValue;
//  4. for v1 programs, prices calls with NewCostEstimator and compiles
//     constant regular expressions once with RegexOptimizations.
//
// Literals that would be slow to parse or compare (more than 64
// characters, exponents of more than 3 digits) are refused in both
// environments; the seed reports them as invalid quantities, the v1
// environment as "quantities of this form are not supported".
package celenv
