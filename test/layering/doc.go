// Package layering pins the module's layering in one test over the whole
// source tree: public packages (api, pkg, examples) import no internal
// ones, the allocator does no I/O and starts no goroutines (and its CEL
// package, celenv, knows no allot package and no API type), the scheduler,
// node agent and dashboard keep their per-directory import rules, and
// every package has a doc comment. It has no code of its own; the rules
// and the walk are in layering_test.go.
package layering
