package dynamicresources

import (
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/pkg/allocator/engine"
)

// NewCountingReuse is New with ReusedChecks counting.
func NewCountingReuse() *DynamicResources {
	p := New()
	p.countReused = true
	return p
}

// ReusedChecks counts the Filter answers that allocator.CheckReusing
// gave again, for a plugin from NewCountingReuse.
func (p *DynamicResources) ReusedChecks() int64 { return p.reused.Load() }

// Reuses reports whether the cycle's PreFilter let it take earlier
// cycles' answers (R9 in reuse.go).
func Reuses(state *framework.CycleState) bool {
	s, ok := readState(state)
	return ok && s.reuse != nil
}

// V1InUse reports whether the v1 base state of o (derived or built)
// counts the device allocated.
func V1InUse(o *Objects, driver, pool, device string) bool {
	return o.v1.baseState().InUse(driver, pool, device)
}

// V1Inventory builds (once) and returns the device inventory of o.
func V1Inventory(o *Objects) *engine.Inventory { return o.v1.inventory() }

// CachedModels is the number of nodes whose Model o's cache holds.
func CachedModels(o *Objects) int {
	o.models.mu.Lock()
	defer o.models.mu.Unlock()
	return len(o.models.m)
}
