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
// The seed environment is here whole: SeedEnv. A caller compiling a seed
// selector (pkg/allocator's selector.go) does, in order:
//
//  1. compiles with SeedEnv() and requires a bool result;
//  2. checks string literals with CheckSeedLiterals — a bad literal is
//     the user's error, reported before any device is evaluated;
//  3. estimates the cost with SeedSizeEstimator and bounds it;
//  4. evaluates against an activation of the Var* maps built with
//     NewQuantity and NewSemver.
//
// The v1 environment declares its device variable itself (its values are
// the v1 API's attributes; pkg/allocator/engine's selector.go) and takes the
// rest from here. A caller building it:
//
//  1. builds the environment from K8sEnvOptions (Kubernetes' base
//     environment and libraries) plus its device variable, and warms it
//     with WarmChecker before sharing it;
//  2. builds capacity and version values with NewK8sQuantity and
//     K8sVersion;
//  3. estimates costs with NewCostEstimator over its variable's sizes,
//     and makes programs with K8sProgramOptions (upstream's prices at run
//     time, the cost limit, constant regular expressions compiled once).
//
// Both report a selector that does not compile with an error wrapping
// ErrInvalidSelector, its CEL issues summarized by IssueSummary (where and
// why, without quoting the source).
//
// QuantityValue and SemverValue read a seed value back (the v1 view of a
// seed device is made from them).
//
// Literals that would be slow to parse or compare (more than 64
// characters, exponents of more than 3 digits) are refused in both
// environments; the seed reports them as invalid quantities, the v1
// environment as "quantities of this form are not supported".
package celenv
