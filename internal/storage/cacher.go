package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// ErrNotReady is returned by Cacher.List and Cacher.Watch when the cache
// has not completed its initial list within the wait bound, or has
// stopped (the caller answers 503/429 and the client retries).
var ErrNotReady = errors.New("storage: watch cache is not ready")

// Decoded is what a DecodeFunc extracts from a stored value: the labels and
// fields selectors match on, an optional decoded object, and optionally
// a part of the value that readers may ask to have left out.
type Decoded struct {
	Labels map[string]string
	Fields map[string]string
	Object any
	Omit   Span
}

// Span is the bytes [From, To) of a stored value; the zero Span is none.
// The API server records where an object's metadata.managedFields are,
// for lists and watches that ask for the objects without them.
type Span struct{ From, To int32 }

// DecodeFunc decodes a stored value. It must not modify value. The cacher
// calls it from one goroutine at a time. Objects it rejects are invisible
// through the cache (and logged).
type DecodeFunc func(key string, value []byte) (Decoded, error)

// Predicate selects objects (built by the API server from label and field
// selectors). It is called with the cacher lock held: it must be fast and
// must not call the Cacher. nil matches everything.
type Predicate func(Decoded) bool

// CachedObject is one object in a Cacher.
type CachedObject struct {
	KV
	Decoded
}

// CacheEvent is one event delivered to a Cacher watcher.
//
// Added/Modified: Object is the new state; PrevObject the state before
// (nil for a creation). Deleted: Object is the last state of the object
// with ModRevision set to Revision. An object that stops matching the
// watcher's predicate arrives as Deleted, one that starts matching as
// Added. Bookmark: only Revision is set; every event up to it was sent.
type CacheEvent struct {
	Type       EventType
	Object     CachedObject
	PrevObject *CachedObject
	Revision   int64
}

// CacherOptions configures a Cacher. Zero values select the defaults.
type CacherOptions struct {
	// EventBuffer is the number of recent events kept for watch replay
	// (default 10000).
	EventBuffer int
	// WatcherBuffer is each watcher's queue length; a watcher whose queue
	// overflows is terminated (default 1000).
	WatcherBuffer int
	// BookmarkInterval enables periodic Bookmark events (0 = off).
	BookmarkInterval time.Duration
	// WaitTimeout bounds how long List and Watch wait for readiness and
	// List for the cache to reach minRev (default 3s).
	WaitTimeout time.Duration
	// ListPageSize is the page size of the initial list (default 10000).
	ListPageSize int64
	// Logger receives cache errors (default slog.Default()).
	Logger *slog.Logger
}

func (o *CacherOptions) setDefaults() {
	if o.EventBuffer <= 0 {
		o.EventBuffer = 10000
	}
	if o.WatcherBuffer <= 0 {
		o.WatcherBuffer = 1000
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 3 * time.Second
	}
	if o.ListPageSize <= 0 {
		o.ListPageSize = 10000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// cacheEvent is a change as recorded in the ring buffer. obj and prev
// share their bytes with the cached objects.
type cacheEvent struct {
	typ  EventType // Added, Modified or Deleted as seen by the cache
	obj  CachedObject
	prev *CachedObject
	rev  int64
}

// Cacher is an in-memory cache of every key under one prefix, fed by a
// single etcd watch, serving List and Watch to many clients.
type Cacher struct {
	store  *Store
	prefix string
	decode DecodeFunc
	opts   CacherOptions
	log    *slog.Logger

	progressWanted chan struct{} // coalesced requests for an etcd progress notify
	done           chan struct{} // closed when the run loop exits
	readyCh        chan struct{} // closed after the first successful list

	mu       sync.RWMutex
	started  bool
	stopped  bool
	rev      int64
	revCh    chan struct{} // closed and replaced whenever rev advances
	objects  objectIndex
	ring     eventRing
	watchers map[*cacheWatcher]struct{}

	// Test hooks, guarded by mu.
	watchCancel context.CancelFunc
	beforeWatch func()
}

// NewCacher returns a Cacher for keys under prefix. decode may be nil (no
// labels or fields). Call Start to fill it.
func NewCacher(s *Store, prefix string, decode DecodeFunc, opts CacherOptions) *Cacher {
	opts.setDefaults()
	if decode == nil {
		decode = func(string, []byte) (Decoded, error) { return Decoded{}, nil }
	}
	return &Cacher{
		store:          s,
		prefix:         prefix,
		decode:         decode,
		opts:           opts,
		log:            opts.Logger.With("component", "cacher", "prefix", prefix),
		progressWanted: make(chan struct{}, 1),
		done:           make(chan struct{}),
		readyCh:        make(chan struct{}),
		revCh:          make(chan struct{}),
		objects:        newObjectIndex(),
		ring:           newEventRing(opts.EventBuffer),
		watchers:       make(map[*cacheWatcher]struct{}),
	}
}

// Start begins the initial list and watch in the background and returns
// at once; it keeps the cache in sync (re-listing after compaction) until
// ctx ends, then terminates all watchers. Use WaitReady to wait for the
// initial list.
func (c *Cacher) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("start cacher for %q: already started", c.prefix)
	}
	c.started = true
	go c.run(ctx)
	return nil
}

// WaitReady blocks until the initial list has completed, ctx ends, or the
// cacher stops.
func (c *Cacher) WaitReady(ctx context.Context) error {
	select {
	case <-c.readyCh:
		return nil
	case <-c.done:
		return fmt.Errorf("wait for cacher %q: %w", c.prefix, ErrNotReady)
	case <-ctx.Done():
		return fmt.Errorf("wait for cacher %q: %w", c.prefix, ctx.Err())
	}
}

// Revision returns the revision the cache is synced to.
func (c *Cacher) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// waitReadyBounded waits for readiness at most opts.WaitTimeout.
func (c *Cacher) waitReadyBounded(ctx context.Context) error {
	select {
	case <-c.readyCh:
	default:
		wctx, cancel := context.WithTimeout(ctx, c.opts.WaitTimeout)
		defer cancel()
		if err := c.WaitReady(wctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("wait for cacher %q: %w", c.prefix, ErrNotReady)
		}
	}
	c.mu.RLock()
	stopped := c.stopped
	c.mu.RUnlock()
	if stopped {
		return fmt.Errorf("use cacher %q: stopped: %w", c.prefix, ErrNotReady)
	}
	return nil
}

// fullPrefix resolves a List/Watch subPrefix: either a key prefix under the
// cacher's prefix or a suffix relative to it; empty means everything.
func (c *Cacher) fullPrefix(subPrefix string) string {
	if strings.HasPrefix(subPrefix, c.prefix) {
		return subPrefix
	}
	return c.prefix + subPrefix
}

// run keeps the cache in sync until ctx ends.
func (c *Cacher) run(ctx context.Context) {
	defer close(c.done)
	defer c.shutdown()
	const maxBackoff = 5 * time.Second
	backoff := 100 * time.Millisecond
	needList := true
	for ctx.Err() == nil {
		if needList {
			if err := c.relist(ctx); err != nil {
				if ctx.Err() == nil {
					c.log.Error("list for watch cache failed", "err", err)
					sleepCtx(ctx, backoff)
					backoff = min(2*backoff, maxBackoff)
				}
				continue
			}
			needList = false
			backoff = 100 * time.Millisecond
		}
		started := time.Now()
		err := c.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 2*maxBackoff {
			backoff = 100 * time.Millisecond // the watch was healthy for a while
		}
		if errors.Is(err, ErrCompacted) {
			c.log.Warn("watch cache fell behind compaction; re-listing", "err", err)
			needList = true
			continue
		}
		c.log.Warn("watch for watch cache ended; resuming", "err", err)
		sleepCtx(ctx, backoff)
		backoff = min(2*backoff, maxBackoff)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// relist loads every object at one revision and replaces the cache
// contents. Watchers of a previous generation are terminated: they cannot
// be told what changed in between.
func (c *Cacher) relist(ctx context.Context) error {
	idx := newObjectIndex()
	var rev int64
	opts := ListOptions{Limit: c.opts.ListPageSize}
	for {
		res, err := c.store.List(ctx, c.prefix, opts)
		if err != nil {
			return fmt.Errorf("list %q for cache: %w", c.prefix, err)
		}
		rev = res.Revision
		for _, kv := range res.Items {
			dec, err := c.decode(kv.Key, kv.Value)
			if err != nil {
				c.log.Error("skip undecodable object", "key", kv.Key, "err", err)
				continue
			}
			idx.appendSorted(&CachedObject{KV: kv, Decoded: dec})
		}
		if res.Continue == "" {
			break
		}
		opts.Continue = res.Continue
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects = idx
	c.ring.reset(rev)
	c.terminateAllLocked()
	c.rev = 0 // force: the list revision replaces whatever was seen
	c.setRevLocked(rev)
	select {
	case <-c.readyCh:
	default:
		close(c.readyCh)
	}
	return nil
}

// watch follows etcd from the cache revision until the watch fails.
func (c *Cacher) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	hook := c.beforeWatch
	c.watchCancel = cancel
	from := c.rev
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	var bookmarks <-chan time.Time
	if c.opts.BookmarkInterval > 0 {
		t := time.NewTicker(c.opts.BookmarkInterval)
		defer t.Stop()
		bookmarks = t.C
	}
	// Progress requests come from one goroutine per watch, which ends
	// with it.
	var wg sync.WaitGroup
	wg.Go(func() { c.progressLoop(wctx, bookmarks) })
	defer wg.Wait()
	defer cancel()
	errc := make(chan error, 1)
	c.store.watchBatches(wctx, c.prefix, from, true, func(b watchBatch) bool {
		if b.err != nil {
			errc <- b.err
			return false
		}
		c.apply(b)
		return true
	})
	select {
	case err := <-errc:
		return err
	default:
		return wctx.Err()
	}
}

// progressLoop asks etcd for a progress notification when a List waits for
// a revision and on every bookmark tick.
func (c *Cacher) progressLoop(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.progressWanted:
		case <-ticks:
		}
		if err := c.store.RequestProgress(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("request watch progress failed", "err", err)
		}
	}
}

// wantProgress asks the watch loop for a progress notification.
func (c *Cacher) wantProgress() {
	select {
	case c.progressWanted <- struct{}{}:
	default:
	}
}

// apply records one etcd watch response atomically: readers never see a
// revision half applied. Values are decoded before taking the lock.
func (c *Cacher) apply(b watchBatch) {
	decoded := make([]Decoded, len(b.events))
	failed := make([]bool, len(b.events))
	for i, ev := range b.events {
		if ev.Type == Deleted {
			continue
		}
		var err error
		if decoded[i], err = c.decode(ev.KV.Key, ev.KV.Value); err != nil {
			// Undecodable objects are invisible through the cache.
			c.log.Error("drop undecodable object", "key", ev.KV.Key, "revision", ev.Revision, "err", err)
			failed[i] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rev := b.progress
	for i, ev := range b.events {
		rev = max(rev, ev.Revision)
		if ev.Type == Deleted || failed[i] {
			c.deleteLocked(ev.KV.Key, ev.Revision)
			continue
		}
		c.upsertLocked(CachedObject{KV: ev.KV, Decoded: decoded[i]})
	}
	c.setRevLocked(rev)
}

func (c *Cacher) upsertLocked(obj CachedObject) {
	prev := c.objects.upsert(obj)
	typ := Modified
	if prev == nil {
		typ = Added
	}
	c.recordLocked(&cacheEvent{typ: typ, obj: obj, prev: prev, rev: obj.ModRevision})
}

func (c *Cacher) deleteLocked(key string, rev int64) {
	prev := c.objects.remove(key)
	if prev == nil {
		return
	}
	obj := *prev
	obj.ModRevision = rev
	c.recordLocked(&cacheEvent{typ: Deleted, obj: obj, prev: prev, rev: rev})
}

func (c *Cacher) recordLocked(ev *cacheEvent) {
	c.ring.push(ev)
	c.dispatchLocked(ev)
}

// setRevLocked advances the cache revision and wakes List waiters.
func (c *Cacher) setRevLocked(rev int64) {
	if rev <= c.rev {
		return
	}
	c.rev = rev
	close(c.revCh)
	c.revCh = make(chan struct{})
}

// shutdown marks the cacher stopped and terminates its watchers.
func (c *Cacher) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.terminateAllLocked()
}
