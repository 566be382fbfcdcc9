package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// List returns the cached objects under subPrefix that match pred, sorted
// by key, and the cache revision they reflect. subPrefix is a key prefix
// under the cacher's prefix (prefix+ns+"/") or relative to it (ns+"/");
// empty lists everything. The call first waits, bounded by ctx and
// CacherOptions.WaitTimeout, until the cache has reached minRev; if it does
// not, the error wraps ErrFutureRevision.
func (c *Cacher) List(ctx context.Context, subPrefix string, minRev int64, pred Predicate) ([]CachedObject, int64, error) {
	if err := c.waitReadyBounded(ctx); err != nil {
		return nil, 0, err
	}
	if err := c.waitFresh(ctx, minRev); err != nil {
		return nil, 0, err
	}
	keyPrefix := c.fullPrefix(subPrefix)
	c.mu.RLock()
	if !c.objects.dirty() {
		defer c.mu.RUnlock()
		return c.objects.collect(keyPrefix, pred), c.rev, nil
	}
	c.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects.merge()
	return c.objects.collect(keyPrefix, pred), c.rev, nil
}

// Get returns the cached object at key (a full key, or one relative to the
// cacher's prefix) and the cache revision, after waiting like List for the
// cache to reach minRev; ok is false when no such object is cached. It
// does not depend on the key order, so unlike List it never sorts.
func (c *Cacher) Get(ctx context.Context, key string, minRev int64) (obj CachedObject, ok bool, rev int64, err error) {
	if err := c.waitReadyBounded(ctx); err != nil {
		return CachedObject{}, false, 0, err
	}
	if err := c.waitFresh(ctx, minRev); err != nil {
		return CachedObject{}, false, 0, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if o := c.objects.byKey[c.fullPrefix(key)]; o != nil {
		return *o, true, c.rev, nil
	}
	return CachedObject{}, false, c.rev, nil
}

// waitFresh waits until the cache revision is at least minRev, asking etcd
// for progress notifications so that writes outside the prefix also move
// the cache revision forward.
func (c *Cacher) waitFresh(ctx context.Context, minRev int64) error {
	var timeout <-chan time.Time
	var retry *time.Ticker
	for {
		c.mu.RLock()
		rev, ch := c.rev, c.revCh
		c.mu.RUnlock()
		if rev >= minRev {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(c.opts.WaitTimeout)
			defer t.Stop()
			timeout = t.C
			retry = time.NewTicker(100 * time.Millisecond)
			defer retry.Stop()
		}
		c.wantProgress()
		select {
		case <-ch:
		case <-retry.C:
		case <-c.done:
			return fmt.Errorf("wait for revision %d: cacher stopped: %w", minRev, ErrNotReady)
		case <-ctx.Done():
			return fmt.Errorf("wait for revision %d: %w", minRev, ctx.Err())
		case <-timeout:
			return fmt.Errorf("wait for revision %d (cache at %d): %w", minRev, rev, ErrFutureRevision)
		}
	}
}

// queued is an event waiting in a watcher's queue, with the type the
// watcher's predicate gives it.
type queued struct {
	ev  *cacheEvent
	typ EventType
}

type cacheWatcher struct {
	keyPrefix string
	pred      Predicate
	fromRev   int64 // only events with a greater revision are delivered
	in        chan queued
	out       chan CacheEvent
	stop      chan struct{}
	stopOnce  sync.Once
	replay    []queued
}

func (w *cacheWatcher) terminate() { w.stopOnce.Do(func() { close(w.stop) }) }

// Watch streams changes under subPrefix (see List) matching pred with a
// revision greater than fromRev; fromRev 0 means from the current cache
// revision. Buffered events newer than fromRev are replayed first. If
// fromRev is older than the buffered history the error wraps ErrCompacted
// (the caller answers 410 Gone "too old resource version"). The channel is
// closed when ctx ends, when the watcher falls WatcherBuffer events behind,
// when the cache re-lists, or when the cacher stops; the client then
// re-watches from the last revision it saw.
func (c *Cacher) Watch(ctx context.Context, subPrefix string, fromRev int64, pred Predicate) (<-chan CacheEvent, error) {
	if err := c.waitReadyBounded(ctx); err != nil {
		return nil, err
	}
	w := &cacheWatcher{
		keyPrefix: c.fullPrefix(subPrefix),
		pred:      pred,
		in:        make(chan queued, c.opts.WatcherBuffer),
		out:       make(chan CacheEvent),
		stop:      make(chan struct{}),
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, fmt.Errorf("watch cacher %q: stopped: %w", c.prefix, ErrNotReady)
	}
	if fromRev == 0 {
		fromRev = c.rev
	}
	if fromRev < c.ring.base {
		base := c.ring.base
		c.mu.Unlock()
		return nil, fmt.Errorf("watch %q from revision %d (oldest available %d): %w", w.keyPrefix, fromRev, base, ErrCompacted)
	}
	w.fromRev = fromRev
	c.ring.since(fromRev, func(ev *cacheEvent) {
		if typ, ok := w.accept(ev); ok {
			w.replay = append(w.replay, queued{ev: ev, typ: typ})
		}
	})
	c.watchers[w] = struct{}{}
	lastRev := max(c.rev, fromRev)
	c.mu.Unlock()
	go c.serveWatcher(ctx, w, lastRev)
	return w.out, nil
}

// accept decides whether w sees ev and as what type, applying predicate
// transitions: an object that stops matching is Deleted for w, one that
// starts matching is Added.
func (w *cacheWatcher) accept(ev *cacheEvent) (EventType, bool) {
	if ev.rev <= w.fromRev || !strings.HasPrefix(ev.obj.Key, w.keyPrefix) {
		return "", false
	}
	cur := ev.typ != Deleted && (w.pred == nil || w.pred(ev.obj.Decoded))
	old := ev.prev != nil && (w.pred == nil || w.pred(ev.prev.Decoded))
	switch {
	case cur && old:
		return Modified, true
	case cur:
		return Added, true
	case old:
		return Deleted, true
	}
	return "", false
}

// dispatchLocked hands ev to every interested watcher without blocking;
// a watcher whose queue is full is terminated.
func (c *Cacher) dispatchLocked(ev *cacheEvent) {
	for w := range c.watchers {
		typ, ok := w.accept(ev)
		if !ok {
			continue
		}
		select {
		case w.in <- queued{ev: ev, typ: typ}:
		default:
			c.log.Warn("terminating slow watcher", "keyPrefix", w.keyPrefix, "buffer", cap(w.in))
			delete(c.watchers, w)
			w.terminate()
		}
	}
}

func (c *Cacher) terminateAllLocked() {
	for w := range c.watchers {
		delete(c.watchers, w)
		w.terminate()
	}
}

// serveWatcher delivers replayed and live events to w.out until the
// watcher ends. lastRev is the revision the client is known to be at.
func (c *Cacher) serveWatcher(ctx context.Context, w *cacheWatcher, lastRev int64) {
	defer close(w.out)
	defer func() {
		c.mu.Lock()
		delete(c.watchers, w)
		c.mu.Unlock()
		w.terminate()
	}()
	send := func(ev CacheEvent) bool {
		select {
		case w.out <- ev:
			lastRev = max(lastRev, ev.Revision)
			return true
		case <-w.stop:
		case <-ctx.Done():
		}
		return false
	}
	for _, q := range w.replay {
		if !send(q.event()) {
			return
		}
	}
	w.replay = nil
	var ticks <-chan time.Time
	if c.opts.BookmarkInterval > 0 {
		t := time.NewTicker(c.opts.BookmarkInterval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		var ev CacheEvent
		select {
		case q := <-w.in:
			ev = q.event()
		case <-ticks:
			rev, ok := c.bookmarkRev(w)
			if !ok || rev <= lastRev {
				continue
			}
			ev = CacheEvent{Type: Bookmark, Revision: rev}
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
		if !send(ev) {
			return
		}
	}
}

// bookmarkRev returns the cache revision if w has nothing queued: then
// every event up to that revision has been sent to w (or did not concern
// it). Checking the queue under the lock that dispatch holds makes the
// pair consistent.
func (c *Cacher) bookmarkRev(w *cacheWatcher) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(w.in) > 0 {
		return 0, false
	}
	return max(c.rev, w.fromRev), true
}

// event builds the CacheEvent a watcher receives.
func (q queued) event() CacheEvent {
	ev := CacheEvent{Type: q.typ, Object: q.ev.obj, PrevObject: q.ev.prev, Revision: q.ev.rev}
	if q.typ == Deleted && q.ev.typ != Deleted {
		// Stopped matching: report the last matching state at this revision.
		ev.Object = *q.ev.prev
		ev.Object.ModRevision = q.ev.rev
	}
	return ev
}
