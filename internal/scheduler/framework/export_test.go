package framework

// Workers is the number of goroutines a cycle over n nodes uses.
func (f *Framework) Workers(n int) int { return f.workers(n) }
