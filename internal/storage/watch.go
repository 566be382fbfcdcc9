package storage

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventType is the kind of a watch event. The values match the Kubernetes
// watch event types.
type EventType string

// Event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Error    EventType = "ERROR"
	// Bookmark carries only a revision: every change up to it has been
	// delivered. Store.Watch emits it only with WithProgressNotify; Cacher
	// watchers get it when CacherOptions.BookmarkInterval is set.
	Bookmark EventType = "BOOKMARK"
)

// Event is one change seen by Store.Watch.
//
// For Added and Modified, KV is the new state. For Deleted, KV holds the
// last value of the object with ModRevision set to the deletion revision,
// and PrevKV is the last stored state as it was. For Error, Err is set
// (ErrCompacted when the start revision was compacted) and the channel
// closes after it.
type Event struct {
	Type     EventType
	KV       KV
	PrevKV   *KV
	Err      error
	Revision int64 // revision of the change (or of the bookmark)
}

// WatchOption configures Store.Watch.
type WatchOption func(*watchConfig)

type watchConfig struct {
	progress bool
	buffer   int
}

// WithProgressNotify makes the watch emit Bookmark events for etcd
// progress notifications, including those requested by RequestProgress.
func WithProgressNotify() WatchOption { return func(c *watchConfig) { c.progress = true } }

// WithWatchBuffer sets the capacity of the returned channel (default 100).
func WithWatchBuffer(n int) WatchOption {
	return func(c *watchConfig) {
		if n >= 0 {
			c.buffer = n
		}
	}
}

// Watch streams changes to keys under prefix with a revision greater than
// fromRev (0 = changes after now). The channel closes when ctx ends or
// after an Error event. If fromRev is compacted the only event is an Error
// wrapping ErrCompacted.
func (s *Store) Watch(ctx context.Context, prefix string, fromRev int64, opts ...WatchOption) <-chan Event {
	cfg := watchConfig{buffer: 100}
	for _, o := range opts {
		o(&cfg)
	}
	out := make(chan Event, cfg.buffer)
	send := func(ev Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	emit := func(b watchBatch) bool {
		for _, ev := range b.events {
			if !send(ev) {
				return false
			}
		}
		switch {
		case b.err != nil:
			return send(Event{Type: Error, Err: b.err})
		case b.progress != 0 && cfg.progress:
			return send(Event{Type: Bookmark, Revision: b.progress})
		}
		return true
	}
	go func() {
		defer close(out)
		s.watchBatches(ctx, prefix, fromRev, cfg.progress, emit)
	}()
	return out
}

// watchBatch holds the events of one etcd watch response: etcd never
// splits one revision across responses, so a batch ends on a revision
// boundary. progress is set for a progress notification; err ends the
// watch.
type watchBatch struct {
	events   []Event
	progress int64
	err      error
}

// watchBatches runs an etcd watch and passes each response to emit until
// ctx ends, emit returns false, or the watch fails (the failure is emitted
// as a batch with err set, unless ctx ended).
func (s *Store) watchBatches(ctx context.Context, prefix string, fromRev int64, progress bool, emit func(watchBatch) bool) {
	wopts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
	if fromRev > 0 {
		wopts = append(wopts, clientv3.WithRev(fromRev+1))
	}
	if progress {
		wopts = append(wopts, clientv3.WithProgressNotify())
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.client.Watch(wctx, prefix, wopts...)
	fail := func(err error) {
		if ctx.Err() == nil {
			emit(watchBatch{err: fmt.Errorf("watch %q from revision %d: %w", prefix, fromRev, err)})
		}
	}
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-wch:
		case <-ctx.Done():
			return
		}
		if !ok {
			fail(errors.New("etcd closed the watch channel"))
			return
		}
		if err := watchRespErr(resp); err != nil {
			fail(err)
			return
		}
		var b watchBatch
		if resp.IsProgressNotify() {
			b.progress = resp.Header.Revision
		}
		for _, e := range resp.Events {
			b.events = append(b.events, convertEvent(e))
		}
		if !emit(b) {
			return
		}
	}
}

func watchRespErr(resp clientv3.WatchResponse) error {
	if resp.CompactRevision != 0 {
		return fmt.Errorf("%w: compacted at %d", ErrCompacted, resp.CompactRevision)
	}
	if err := resp.Err(); err != nil {
		return mapErr(err)
	}
	if resp.Canceled {
		return errors.New("watch canceled by etcd")
	}
	return nil
}

func convertEvent(e *clientv3.Event) Event {
	ev := Event{KV: kvFromPB(e.Kv), Revision: e.Kv.ModRevision}
	if e.PrevKv != nil {
		prev := kvFromPB(e.PrevKv)
		ev.PrevKV = &prev
	}
	switch {
	case e.Type == clientv3.EventTypeDelete:
		ev.Type = Deleted
		if ev.PrevKV != nil {
			ev.KV.Value = ev.PrevKV.Value
			ev.KV.CreateRevision = ev.PrevKV.CreateRevision
		}
	case e.IsCreate():
		ev.Type = Added
	default:
		ev.Type = Modified
	}
	return ev
}

// RequestProgress asks etcd to send a progress notification on every watch
// opened by this Store; watches with WithProgressNotify then emit a
// Bookmark carrying a revision up to which all changes were delivered.
func (s *Store) RequestProgress(ctx context.Context) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	// Watches are opened with WithRequireLeader metadata; the progress
	// request must carry the same metadata to reach the same gRPC stream.
	if err := s.client.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
		return fmt.Errorf("request watch progress: %w", err)
	}
	return nil
}
