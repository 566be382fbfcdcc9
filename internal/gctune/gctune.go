// Package gctune sets the garbage collector's target for allot's
// long-running components.
//
// The control plane allocates mostly short-lived request and event
// objects against a large, slowly changing heap (informer caches, the
// watch cache, the allocator's models). At Go's default GOGC=100 the
// collector ran 15 % of all CPU in BenchmarkDRA's 5000pods; at 200 the
// pipeline moved 10-20 % more pods per second for about 30 % more peak
// memory (docs/decisions.md, bench/README.md). The components therefore default to
// DefaultPercent; the GOGC environment variable, when set, wins over the
// default, and an explicit --gc-percent wins over both.
package gctune

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// DefaultPercent is the GOGC value of allot's long-running components.
const DefaultPercent = 200

// Apply sets the collector's target: percent when explicit (a flag the
// user set) or when GOGC is not set in the environment; otherwise GOGC
// stays as the environment says. A negative percent turns the collector
// off, as GOGC=off does. It returns the value in effect.
func Apply(percent int, explicit bool) int {
	if !explicit {
		if _, set := os.LookupEnv("GOGC"); set {
			return current()
		}
	}
	debug.SetGCPercent(percent)
	return percent
}

// current is the collector's target in effect.
func current() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
