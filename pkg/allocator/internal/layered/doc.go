// Package layered is a copy-on-write map for immutable snapshots (Map):
// a base shared between versions and a small delta of each version's
// own, folded into a new base once it outgrows √(2·base) keys, so that
// reads stay one or two lookups and a change costs O(1) amortized. The
// allocator's engine state, claim sets and simulations derive each
// snapshot from the previous one this way.
//
// A caller does, in order: New(m) once (the Map takes m), or
// NewFilling, Set and Del to fill an empty map in place, then Fold; then either
// With(set, del) for a new version, leaving the old one readable, or
// Derived (a version to write in place with Set and Del before anyone
// else reads it) or Clone (an independent copy, for a single owner that
// keeps writing, as a Simulation does); Get, Len, Each and Keys on any
// version. A version nobody writes any more is safe for concurrent
// reads.
package layered
