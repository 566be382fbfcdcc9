package dynamicresources

// NewCountingReuse is New with ReusedChecks counting.
func NewCountingReuse() *DynamicResources {
	p := New()
	p.countReused = true
	return p
}

// ReusedChecks counts the Filter answers that allocator.CheckReusing
// gave again, for a plugin from NewCountingReuse.
func (p *DynamicResources) ReusedChecks() int64 { return p.reused.Load() }
