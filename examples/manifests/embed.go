// Package manifests holds the example manifests, embedded for `allot up
// --demo`.
package manifests

import _ "embed"

// Demo is demo.yaml: the demo workload of `allot up --demo`.
//
//go:embed demo.yaml
var Demo []byte
