package storage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

// recv returns the next event or fails after a generous timeout.
func recv[E any](t testing.TB, ch <-chan E) E {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("channel closed, want an event")
		}
		return ev
	case <-time.After(60 * time.Second):
		t.Fatal("no event within 60s")
	}
	panic("unreachable")
}

// waitClosed drains ch until it is closed, failing after a timeout.
func waitClosed[E any](t testing.TB, ch <-chan E) []E {
	t.Helper()
	var got []E
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatal("channel not closed within 60s")
		}
	}
}

func TestWatchFromRevision(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	must[int64](t)(s.Create(ctx, p+"a", []byte("a1")))
	start := must[int64](t)(s.Create(ctx, p+"b", []byte("b1")))
	modRev := must[int64](t)(s.Update(ctx, p+"a", []byte("a2"), 0))
	delRev, _, err := s.Delete(ctx, p+"b", 0)
	if err != nil {
		t.Fatal(err)
	}
	must[int64](t)(s.Create(ctx, "/elsewhere"+p, nil)) // outside the prefix

	wctx, cancel := context.WithCancel(ctx)
	ch := s.Watch(wctx, p, start)
	ev := recv(t, ch)
	if ev.Type != storage.Modified || ev.KV.Key != p+"a" || string(ev.KV.Value) != "a2" || ev.Revision != modRev {
		t.Fatalf("got %+v, want MODIFIED a=a2@%d", ev, modRev)
	}
	if ev.PrevKV == nil || string(ev.PrevKV.Value) != "a1" {
		t.Fatalf("modify event prev %+v, want a1", ev.PrevKV)
	}
	ev = recv(t, ch)
	if ev.Type != storage.Deleted || ev.KV.Key != p+"b" || string(ev.KV.Value) != "b1" || ev.KV.ModRevision != delRev {
		t.Fatalf("got %+v, want DELETED b with last value b1 at %d", ev, delRev)
	}
	if ev.PrevKV == nil || ev.PrevKV.ModRevision != start {
		t.Fatalf("delete prev %+v, want modrev %d", ev.PrevKV, start)
	}
	addRev := must[int64](t)(s.Create(ctx, p+"c", []byte("c1")))
	ev = recv(t, ch)
	if ev.Type != storage.Added || ev.KV.Key != p+"c" || ev.Revision != addRev || ev.PrevKV != nil {
		t.Fatalf("got %+v, want ADDED c@%d", ev, addRev)
	}
	cancel()
	waitClosed(t, ch)

	// fromRev 0 starts from now.
	wctx, cancel = context.WithCancel(ctx)
	defer cancel()
	ch = s.Watch(wctx, p, 0)
	// The watch is registered asynchronously; write until an event shows
	// up, then check it is not one of the historical ones.
	var got storage.Event
	eventually(t, "watch from now sees a new write", func() error {
		rev := must[int64](t)(s.Update(ctx, p+"c", []byte("c-next"), 0))
		select {
		case got = <-ch:
			if got.Revision < addRev {
				t.Fatalf("watch from now delivered old event %+v", got)
			}
			return nil
		case <-time.After(500 * time.Millisecond):
			return fmt.Errorf("no event for write at %d", rev)
		}
	})
}

func TestCompaction(t *testing.T) {
	ctx := testCtx(t)
	s := storagetest.NewStore(t) // own etcd: compaction affects everyone
	p := storagetest.Prefix(t)
	for i := range 5 {
		must[int64](t)(s.Create(ctx, fmt.Sprintf("%sk%d", p, i), []byte("v")))
	}
	page := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{Limit: 2}))
	old := page.Revision
	for i := range 5 {
		must[int64](t)(s.Update(ctx, fmt.Sprintf("%sk%d", p, i), []byte("v2"), 0))
	}
	cur := must[int64](t)(s.CurrentRevision(ctx))
	if err := s.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	mustErrIs(t, s.Compact(ctx, cur-1), storage.ErrCompacted)

	_, err := s.List(ctx, p, storage.ListOptions{Revision: old})
	mustErrIs(t, err, storage.ErrCompacted)
	_, err = s.List(ctx, p, storage.ListOptions{Limit: 2, Continue: page.Continue})
	mustErrIs(t, err, storage.ErrCompacted)

	evs := waitClosed(t, s.Watch(ctx, p, old))
	if len(evs) != 1 || evs[0].Type != storage.Error || !errors.Is(evs[0].Err, storage.ErrCompacted) {
		t.Fatalf("watch from compacted revision delivered %+v, want one ErrCompacted error", evs)
	}
	// Current state is unaffected.
	res := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{}))
	if len(res.Items) != 5 || string(res.Items[0].Value) != "v2" {
		t.Fatalf("after compaction list = %+v", res.Items)
	}
	// Watching from the compaction point itself works.
	ch := s.Watch(ctx, p, cur)
	rev := must[int64](t)(s.Update(ctx, p+"k0", []byte("v3"), 0))
	if ev := recv(t, ch); ev.Revision != rev {
		t.Fatalf("got %+v, want event at %d", ev, rev)
	}
}

func TestRunCompactor(t *testing.T) {
	ctx := testCtx(t)
	s := storagetest.NewStore(t)
	p := storagetest.Prefix(t)
	first := must[int64](t)(s.Create(ctx, p+"k", []byte("0")))
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		storage.RunCompactor(cctx, s, 50*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	i := 0
	eventually(t, "compactor compacts old revisions", func() error {
		i++
		must[int64](t)(s.Update(ctx, p+"k", fmt.Appendf(nil, "%d", i), 0))
		_, err := s.List(ctx, p, storage.ListOptions{Revision: first})
		if errors.Is(err, storage.ErrCompacted) {
			return nil
		}
		return fmt.Errorf("list at %d: %v", first, err)
	})
	res := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{}))
	if len(res.Items) != 1 || string(res.Items[0].Value) != fmt.Sprint(i) {
		t.Fatalf("latest state after compaction: %+v", res.Items)
	}
	cancel()
	<-done
}
