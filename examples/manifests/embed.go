// Package manifests holds the example manifests, embedded for `allot up
// --demo`.
package manifests

import _ "embed"

// Seed002 is seed-002.yaml: the example of seed 002 (KEP-4381, dynamic
// resource allocation with structured parameters), the one copy every test
// that needs it reads.
//
//go:embed seed-002.yaml
var Seed002 []byte

// Demo is demo.yaml: the demo workload of `allot up --demo`.
//
//go:embed demo.yaml
var Demo []byte
