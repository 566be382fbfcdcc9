package storage

// PauseWatchForTest cancels the cacher's etcd watch and holds the next
// (re)watch until release is closed, so a test can write and compact while
// the cacher is not watching. The returned channel is closed once the
// previous watch has ended and the cacher is held.
func (c *Cacher) PauseWatchForTest(release <-chan struct{}) <-chan struct{} {
	paused := make(chan struct{})
	c.mu.Lock()
	cancel := c.watchCancel
	c.beforeWatch = func() {
		close(paused)
		<-release
		c.mu.Lock()
		c.beforeWatch = nil
		c.mu.Unlock()
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return paused
}

// CatchUpEntriesForTest is the raft catch-up window the embedded member
// runs with, and the one embeddedConfig asks for.
func (e *Embedded) CatchUpEntriesForTest() (running, configured uint64) {
	return e.etcd.Server.Cfg.SnapshotCatchUpEntries, embeddedCatchUpEntries
}
