package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
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
// revision. Buffered events newer than fromRev are replayed first. When
// fromRev is older than the buffered history (always so for a client that
// watched an API server before it restarted: a new cache starts with an
// empty ring), the changes between fromRev and the ring's start are read
// from etcd's history first (see history); only when etcd has compacted
// them, or there are more than EventBuffer of them, does the error wrap
// ErrCompacted (the caller answers 410 Gone "too old resource version").
// The channel is closed when ctx ends, when the watcher falls
// WatcherBuffer events behind, when the cache re-lists, or when the cacher
// stops; the client then re-watches from the last revision it saw.
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
	// From the ring's start on, the ring and then the live dispatch serve
	// w; what lies before it comes from etcd, read below while live events
	// queue in w.in.
	histFrom, histTo := fromRev, c.ring.base
	w.fromRev = max(fromRev, histTo)
	c.ring.since(w.fromRev, func(ev *cacheEvent) {
		if typ, ok := w.accept(ev); ok {
			w.replay = append(w.replay, queued{ev: ev, typ: typ})
		}
	})
	c.watchers[w] = struct{}{}
	lastRev := max(c.rev, w.fromRev)
	c.mu.Unlock()
	if histFrom < histTo {
		hist, err := c.history(ctx, w, histFrom, histTo)
		if err != nil {
			c.mu.Lock()
			delete(c.watchers, w)
			c.mu.Unlock()
			w.terminate()
			return nil, err
		}
		w.replay = append(hist, w.replay...)
	}
	go c.serveWatcher(ctx, w, lastRev)
	return w.out, nil
}

// history reads from etcd the changes under w's prefix with revisions in
// (from, to] that w's predicate accepts, oldest first. It is how a watch
// resumes across an API server restart without a relist: the client's
// revision is older than anything the new cache has seen, but etcd keeps
// every revision since its last compaction. The etcd watch is ended once
// it has passed to: at an event newer than to, or at a progress
// notification (asked for until it comes, which etcd sends once the
// history watches, on a gRPC stream of their own, have caught up) at or
// past to. Undecodable values are invisible, as in
// the cache. The error wraps ErrCompacted when etcd has compacted from,
// when more than EventBuffer events would be replayed, or when the history
// is not read within WaitTimeout: the client then re-lists, as it did
// before history was read.
func (c *Cacher) history(ctx context.Context, w *cacheWatcher, from, to int64) ([]queued, error) {
	hctx, cancel := context.WithTimeout(ctx, c.opts.WaitTimeout)
	defer cancel()
	// A gRPC stream of its own: etcd answers a progress request only when
	// every watch on the stream has caught up and none starts in the
	// future, as the caches' own watches do until the next write.
	hctx = metadata.AppendToOutgoingContext(hctx, "allot-watch-stream", "history")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		t := time.NewTicker(historyProgressInterval)
		defer t.Stop()
		for {
			if err := c.store.RequestProgress(hctx); err != nil && hctx.Err() == nil {
				c.log.Warn("request watch progress for history failed", "err", err)
			}
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
		}
	})
	var out []queued
	var failed error
	done := false
	c.store.watchBatches(hctx, w.keyPrefix, from, true, func(b watchBatch) bool {
		if b.err != nil {
			failed = b.err
			return false
		}
		for _, e := range b.events {
			if e.Revision > to {
				done = true
				return false
			}
			ev := c.historyEvent(e)
			if ev == nil {
				continue
			}
			if typ, ok := transition(ev, w.pred); ok {
				if len(out) == c.opts.EventBuffer {
					failed = fmt.Errorf("more than %d changes since revision %d: %w", c.opts.EventBuffer, from, ErrCompacted)
					return false
				}
				out = append(out, queued{ev: ev, typ: typ})
			}
		}
		if b.progress >= to {
			done = true
			return false
		}
		return true
	})
	switch {
	case done:
		return out, nil
	case failed != nil:
		return nil, fmt.Errorf("watch %q from revision %d (cache history starts at %d): %w", w.keyPrefix, from, to, failed)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("watch %q from revision %d: %w", w.keyPrefix, from, ctx.Err())
	default:
		return nil, fmt.Errorf("watch %q from revision %d: etcd's history up to %d not read within %s: %w", w.keyPrefix, from, to, c.opts.WaitTimeout, ErrCompacted)
	}
}

// historyProgressInterval is how often history asks etcd for a progress
// notification while it waits for its watch to catch up.
const historyProgressInterval = 50 * time.Millisecond

// historyEvent turns an etcd change into the event the cache would have
// recorded for it, or nil when neither state is decodable.
func (c *Cacher) historyEvent(e Event) *cacheEvent {
	decode := func(kv KV) *CachedObject {
		d, err := c.decode(kv.Key, kv.Value)
		if err != nil {
			return nil
		}
		return &CachedObject{KV: kv, Decoded: d}
	}
	var prev *CachedObject
	if e.PrevKV != nil {
		prev = decode(*e.PrevKV)
	}
	var cur *CachedObject
	if e.Type != Deleted {
		cur = decode(e.KV)
	}
	switch {
	case cur != nil && prev != nil:
		return &cacheEvent{typ: Modified, obj: *cur, prev: prev, rev: e.Revision}
	case cur != nil:
		return &cacheEvent{typ: Added, obj: *cur, rev: e.Revision}
	case prev != nil:
		obj := *prev
		obj.ModRevision = e.Revision
		return &cacheEvent{typ: Deleted, obj: obj, prev: prev, rev: e.Revision}
	}
	return nil
}

// accept decides whether w sees ev and as what type, applying predicate
// transitions: an object that stops matching is Deleted for w, one that
// starts matching is Added.
func (w *cacheWatcher) accept(ev *cacheEvent) (EventType, bool) {
	if ev.rev <= w.fromRev || !strings.HasPrefix(ev.obj.Key, w.keyPrefix) {
		return "", false
	}
	return transition(ev, w.pred)
}

// transition is the type of ev for a watcher with predicate pred, if it
// sees ev at all.
func transition(ev *cacheEvent, pred Predicate) (EventType, bool) {
	cur := ev.typ != Deleted && (pred == nil || pred(ev.obj.Decoded))
	old := ev.prev != nil && (pred == nil || pred(ev.prev.Decoded))
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
