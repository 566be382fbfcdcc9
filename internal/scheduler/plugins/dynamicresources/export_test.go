package dynamicresources

// ReusedChecks counts the Filter answers taken from the plugin's cache of
// allocator results.
func (p *DynamicResources) ReusedChecks() int64 { return p.reused.Load() }
