package storage_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

func TestCacherRelistAfterCompaction(t *testing.T) {
	ctx := testCtx(t)
	s := storagetest.NewStore(t) // compacts: own etcd
	p := storagetest.Prefix(t)
	for i := range 5 {
		must[int64](t)(s.Create(ctx, fmt.Sprintf("%so%d", p, i), encodeObj(nil, "0")))
	}
	c := startCacher(t, s, p, storage.CacherOptions{})
	before := c.Revision()
	w, err := c.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	<-c.PauseWatchForTest(release)
	must[int64](t)(s.Update(ctx, p+"o1", encodeObj(nil, "1"), 0))
	if _, _, err := s.Delete(ctx, p+"o2", 0); err != nil {
		t.Fatal(err)
	}
	must[int64](t)(s.Create(ctx, p+"o9", encodeObj(nil, "9")))
	cur := must[int64](t)(s.CurrentRevision(ctx))
	if err := s.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	close(release)

	// The re-list terminates watchers of the old generation.
	waitClosed(t, w)
	objs, _, err := c.List(ctx, "", cur, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{}))
	if fmt.Sprint(keysOf(objs)) != fmt.Sprint(kvKeys(res.Items)) {
		t.Fatalf("after re-list cacher has %v, etcd %v", keysOf(objs), kvKeys(res.Items))
	}
	_, err = c.Watch(ctx, "", before, nil)
	mustErrIs(t, err, storage.ErrCompacted)
	w2, err := c.Watch(ctx, "", c.Revision(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rev := must[int64](t)(s.Update(ctx, p+"o9", encodeObj(nil, "10"), 0))
	if ev := recv(t, w2); ev.Type != storage.Modified || ev.Revision != rev {
		t.Fatalf("after re-list got %+v, want MODIFIED at %d", ev, rev)
	}
}

func keysOf(objs []storage.CachedObject) []string {
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s@%d", o.Key, o.ModRevision))
	}
	return out
}

func kvKeys(kvs []storage.KV) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, fmt.Sprintf("%s@%d", kv.Key, kv.ModRevision))
	}
	return out
}

func TestCacherStopEndsWatchers(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := storage.NewCacher(s, p, decodeObj, storage.CacherOptions{Logger: storagetest.QuietLogger()})
	cctx, cancel := context.WithCancel(ctx)
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(cctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	w1, err := c.Watch(wctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := c.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	wcancel()
	waitClosed(t, w1) // watcher context ended
	cancel()
	waitClosed(t, w2) // cacher stopped
	eventually(t, "stopped cacher refuses lists", func() error {
		_, _, err := c.List(ctx, "", 0, nil)
		if errors.Is(err, storage.ErrNotReady) {
			return nil
		}
		return fmt.Errorf("list on stopped cacher: %v", err)
	})
}

func TestCacherNoGoroutineLeak(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	base := runtime.NumGoroutine()
	cctx, cancel := context.WithCancel(ctx)
	c := storage.NewCacher(s, p, decodeObj, storage.CacherOptions{BookmarkInterval: 10 * time.Millisecond, Logger: storagetest.QuietLogger()})
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	var chans []<-chan storage.CacheEvent
	for range 20 {
		ch, err := c.Watch(wctx, "", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	rev := must[int64](t)(s.Create(ctx, p+"a", encodeObj(nil, "")))
	for _, ch := range chans {
		for ev := recv(t, ch); ev.Revision < rev; ev = recv(t, ch) {
		}
	}
	wcancel()
	for _, ch := range chans {
		waitClosed(t, ch)
	}
	cancel()
	eventually(t, "cacher stops", func() error {
		if _, _, err := c.List(ctx, "", 0, nil); !errors.Is(err, storage.ErrNotReady) {
			return fmt.Errorf("list: %v", err)
		}
		return nil
	})
	// A progress request racing with the end of the last watch can leave
	// the client's shared watch stream open without watchers; the next
	// watch adopts it and closes it when done.
	rctx, rcancel := context.WithCancel(ctx)
	sw := s.Watch(rctx, p, rev)
	must[int64](t)(s.Update(ctx, p+"a", encodeObj(nil, "2"), 0))
	recv(t, sw) // the watch is established
	rcancel()
	waitClosed(t, sw)
	eventually(t, "goroutines return to the baseline", func() error {
		if n := runtime.NumGoroutine(); n > base {
			return fmt.Errorf("%d goroutines, baseline %d", n, base)
		}
		return nil
	})
}
