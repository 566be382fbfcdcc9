package storage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

type testObj struct {
	Labels map[string]string `json:"labels,omitempty"`
	Data   string            `json:"data"`
}

func encodeObj(labels map[string]string, data string) []byte {
	b, err := json.Marshal(testObj{Labels: labels, Data: data})
	if err != nil {
		panic(err)
	}
	return b
}

func decodeObj(_ string, value []byte) (storage.Decoded, error) {
	var o testObj
	if err := json.Unmarshal(value, &o); err != nil {
		return storage.Decoded{}, fmt.Errorf("decode test object: %w", err)
	}
	return storage.Decoded{Labels: o.Labels, Fields: map[string]string{"data": o.Data}, Object: o}, nil
}

// startCacher starts a cacher that stops with the test.
func startCacher(t testing.TB, s *storage.Store, prefix string, opts storage.CacherOptions) *storage.Cacher {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = storagetest.QuietLogger()
	}
	c := storage.NewCacher(s, prefix, decodeObj, opts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

type evKey struct {
	typ storage.EventType
	key string
	rev int64
}

// collect reads n events from ch.
func collect(t testing.TB, ch <-chan storage.CacheEvent, n int) []evKey {
	t.Helper()
	out := make([]evKey, 0, n)
	for len(out) < n {
		ev := recv(t, ch)
		if ev.Type == storage.Bookmark {
			continue
		}
		out = append(out, evKey{ev.Type, ev.Object.Key, ev.Revision})
	}
	return out
}

// randomOps applies n random creates, updates, deletes and multi-key
// transactions under p and returns the number of events they produce.
func randomOps(t testing.TB, s *storage.Store, p string, n int, seed uint64) int {
	ctx := testCtx(t)
	r := rand.New(rand.NewPCG(seed, 1))
	events := 0
	for i := range n {
		key := fmt.Sprintf("%sns%d/o%02d", p, r.IntN(3), r.IntN(15))
		val := encodeObj(map[string]string{"app": fmt.Sprint(r.IntN(2))}, fmt.Sprint(i))
		var err error
		switch r.IntN(4) {
		case 0:
			_, err = s.Create(ctx, key, val)
		case 1:
			_, err = s.Update(ctx, key, val, 0)
		case 2:
			_, _, err = s.Delete(ctx, key, 0)
		case 3:
			k2 := fmt.Sprintf("%sns%d/t%03d", p, r.IntN(3), i)
			_, err = s.Txn(ctx, []storage.Op{storage.Put(key, val), storage.Create(k2, val)})
			if err == nil {
				events++ // two events at one revision
			}
		}
		switch {
		case err == nil:
			events++
		case errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrNotFound):
		default:
			t.Fatal(err)
		}
	}
	return events
}

func TestCacherMatchesEtcd(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	randomOps(t, s, p, 40, 1) // initial state, picked up by the first list
	c := startCacher(t, s, p, storage.CacherOptions{ListPageSize: 7})
	rev0 := c.Revision()
	cw, err := c.Watch(ctx, "", rev0, nil)
	if err != nil {
		t.Fatal(err)
	}
	sw := s.Watch(ctx, p, rev0)

	n := randomOps(t, s, p, 300, 2)
	want := make([]evKey, 0, n)
	for range n {
		ev := recv(t, sw)
		want = append(want, evKey{ev.Type, ev.KV.Key, ev.Revision})
	}
	if got := collect(t, cw, n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cacher watch events differ from etcd:\n got %v\nwant %v", got, want)
	}
	// A late watcher replays the same history from the ring buffer.
	replay, err := c.Watch(ctx, "", rev0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, replay, n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed events differ from etcd:\n got %v\nwant %v", got, want)
	}
	// A cacher started now (an API server that restarted) has none of it
	// in its ring; it reads the same history from etcd, with the same
	// predicate transitions, and goes on with live events after it.
	c2 := startCacher(t, s, p, storage.CacherOptions{})
	fromEtcd, err := c2.Watch(ctx, "", rev0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, fromEtcd, n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events read from etcd's history differ from etcd's watch:\n got %v\nwant %v", got, want)
	}
	app1 := func(d storage.Decoded) bool { return d.Labels["app"] == "1" }
	for _, sub := range []string{"", "ns1/"} {
		ringW, err := c.Watch(ctx, sub, rev0, app1)
		if err != nil {
			t.Fatal(err)
		}
		histW, err := c2.Watch(ctx, sub, rev0, app1)
		if err != nil {
			t.Fatal(err)
		}
		last := must[int64](t)(s.Create(ctx, p+"ns1/zz-after-"+sub, encodeObj(map[string]string{"app": "1"}, "")))
		var a, b []evKey
		for len(a) == 0 || a[len(a)-1].rev < last {
			a = append(a, collect(t, ringW, 1)...)
		}
		for len(b) == 0 || b[len(b)-1].rev < last {
			b = append(b, collect(t, histW, 1)...)
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("watch %q with a predicate: history from etcd differs from the ring's:\n etcd %v\n ring %v", sub, b, a)
		}
	}

	cur := must[int64](t)(s.CurrentRevision(ctx))
	for _, sub := range []string{"", "ns1/", p + "ns2/"} {
		objs, rev, err := c.List(ctx, sub, cur, nil)
		if err != nil {
			t.Fatal(err)
		}
		full := sub
		if sub == "" || sub[0] != '/' {
			full = p + sub
		}
		res := must[storage.ListResult](t)(s.List(ctx, full, storage.ListOptions{Revision: rev}))
		if len(objs) != len(res.Items) {
			t.Fatalf("list %q: cacher has %d objects, etcd %d", sub, len(objs), len(res.Items))
		}
		for i, o := range objs {
			kv := res.Items[i]
			if o.Key != kv.Key || o.ModRevision != kv.ModRevision || string(o.Value) != string(kv.Value) {
				t.Fatalf("list %q item %d: cacher %s@%d, etcd %s@%d", sub, i, o.Key, o.ModRevision, kv.Key, kv.ModRevision)
			}
		}
	}
	// Predicates filter lists.
	objs, _, err := c.List(ctx, "", cur, func(d storage.Decoded) bool { return d.Labels["app"] == "1" })
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Labels["app"] != "1" {
			t.Fatalf("predicate let %s through", o.Key)
		}
	}
}

func TestCacherPredicateTransitions(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{})
	pred := func(d storage.Decoded) bool { return d.Labels["app"] == "x" }
	ch, err := c.Watch(ctx, "", 0, pred)
	if err != nil {
		t.Fatal(err)
	}
	x := map[string]string{"app": "x"}
	y := map[string]string{"app": "y"}
	key := p + "ns/a"
	must[int64](t)(s.Create(ctx, p+"ns/other", encodeObj(y, "never matches")))
	r1 := must[int64](t)(s.Create(ctx, key, encodeObj(x, "1")))
	r2 := must[int64](t)(s.Update(ctx, key, encodeObj(y, "2"), 0))
	r3 := must[int64](t)(s.Update(ctx, key, encodeObj(y, "3"), 0)) // invisible
	r4 := must[int64](t)(s.Update(ctx, key, encodeObj(x, "4"), 0))
	r5 := must[int64](t)(s.Update(ctx, key, encodeObj(x, "5"), 0))
	r6, _, err := s.Delete(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = r3
	want := []struct {
		typ  storage.EventType
		rev  int64
		data string
	}{
		{storage.Added, r1, "1"},
		{storage.Deleted, r2, "1"}, // stopped matching: last matching state
		{storage.Added, r4, "4"},   // started matching again
		{storage.Modified, r5, "5"},
		{storage.Deleted, r6, "5"},
	}
	for i, w := range want {
		ev := recv(t, ch)
		got := ev.Object.Fields["data"]
		if ev.Type != w.typ || ev.Revision != w.rev || ev.Object.ModRevision != w.rev || got != w.data || ev.Object.Key != key {
			t.Fatalf("event %d: got %s %s@%d data %q, want %s@%d data %q", i, ev.Type, ev.Object.Key, ev.Revision, got, w.typ, w.rev, w.data)
		}
	}
}

func TestCacherManyWatchersGetEveryEvent(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{})
	const watchers, events = 100, 200
	chans := make([]<-chan storage.CacheEvent, watchers)
	for i := range chans {
		ch, err := c.Watch(ctx, "", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
	}
	errc := make(chan error, watchers)
	for i, ch := range chans {
		go func() {
			var last int64
			for n := 0; n < events; {
				ev, ok := <-ch
				if !ok {
					errc <- fmt.Errorf("watcher %d closed after %d events", i, n)
					return
				}
				if ev.Revision <= last {
					errc <- fmt.Errorf("watcher %d: revision %d after %d", i, ev.Revision, last)
					return
				}
				last = ev.Revision
				n++
			}
			errc <- nil
		}()
	}
	for i := range events {
		must[int64](t)(s.Create(ctx, fmt.Sprintf("%sns/o%04d", p, i), encodeObj(nil, "")))
	}
	for range watchers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

func TestCacherSlowWatcherTerminated(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{WatcherBuffer: 5})
	slow, err := c.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := c.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	const events = 50
	for i := range events {
		rev := must[int64](t)(s.Create(ctx, fmt.Sprintf("%so%03d", p, i), encodeObj(nil, "")))
		// Lockstep with the fast watcher: it must get every event even
		// while the slow one is stuck.
		if ev := recv(t, fast); ev.Revision != rev {
			t.Fatalf("fast watcher got %+v, want revision %d", ev, rev)
		}
	}
	// The slow watcher never read; its queue overflowed and it was closed.
	if got := waitClosed(t, slow); len(got) >= events {
		t.Fatalf("slow watcher received all %d events, want termination", len(got))
	}
}

// TestCacherWatchTooOldRevision: a watch from before the ring's start is
// served from etcd's history unless that holds more than EventBuffer
// events or is compacted; then the error wraps ErrCompacted (410).
func TestCacherWatchTooOldRevision(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{EventBuffer: 5})
	start := c.Revision()
	var revs []int64
	for i := range 20 {
		revs = append(revs, must[int64](t)(s.Create(ctx, fmt.Sprintf("%so%02d", p, i), encodeObj(nil, ""))))
	}
	eventually(t, "cache catches up", func() error {
		if c.Revision() < revs[19] {
			return fmt.Errorf("cache at %d", c.Revision())
		}
		return nil
	})
	// The ring holds revs[15:]; 20 events from etcd are too many.
	_, err := c.Watch(ctx, "", start, nil)
	mustErrIs(t, err, storage.ErrCompacted)
	// Two from etcd's history, then five from the ring.
	ch, err := c.Watch(ctx, "", revs[12], nil)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, ch, 7)
	for i, ev := range got {
		if ev.rev != revs[13+i] || ev.typ != storage.Added {
			t.Fatalf("replayed %v, want ADDED at revisions %v", got, revs[13:])
		}
	}
	// Compacted history is gone: 410, as before.
	if err := s.Compact(ctx, revs[14]); err != nil {
		t.Fatal(err)
	}
	_, err = c.Watch(ctx, "", revs[12], nil)
	mustErrIs(t, err, storage.ErrCompacted)
}

func TestCacherListWaitsForRevision(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{})
	// A write outside the prefix moves etcd's revision but not the
	// cacher's; List must still reach it through a progress notification.
	outside := must[int64](t)(s.Create(ctx, "/outside"+p, nil))
	var rev int64
	eventually(t, "list at a revision written elsewhere", func() error {
		var err error
		_, rev, err = c.List(ctx, "", outside, nil)
		return err
	})
	if rev < outside {
		t.Fatalf("list revision %d < %d", rev, outside)
	}

	short := startCacher(t, s, p, storage.CacherOptions{WaitTimeout: 200 * time.Millisecond})
	_, _, err := short.List(ctx, "", outside+1000, nil)
	mustErrIs(t, err, storage.ErrFutureRevision)
}

func TestCacherBookmarks(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{BookmarkInterval: 50 * time.Millisecond})
	ch, err := c.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	inside := must[int64](t)(s.Create(ctx, p+"a", encodeObj(nil, "")))
	outside := must[int64](t)(s.Create(ctx, "/outside"+p, nil))
	if ev := recv(t, ch); ev.Type != storage.Added || ev.Revision != inside {
		t.Fatalf("got %+v, want ADDED at %d", ev, inside)
	}
	for {
		ev := recv(t, ch)
		if ev.Type != storage.Bookmark {
			t.Fatalf("got %+v, want only bookmarks", ev)
		}
		if ev.Revision >= outside {
			break
		}
	}
}

func TestCacherHidesUndecodableObjects(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	must[int64](t)(s.Create(ctx, p+"bad-at-list", []byte("not json")))
	c := startCacher(t, s, p, storage.CacherOptions{})
	ch, err := c.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	must[int64](t)(s.Create(ctx, p+"a", encodeObj(nil, "ok")))
	must[int64](t)(s.Create(ctx, p+"bad-at-watch", []byte("{")))
	rev := must[int64](t)(s.Update(ctx, p+"a", []byte("corrupt"), 0))
	if ev := recv(t, ch); ev.Type != storage.Added || ev.Object.Key != p+"a" {
		t.Fatalf("got %+v, want ADDED a", ev)
	}
	if ev := recv(t, ch); ev.Type != storage.Deleted || ev.Object.Key != p+"a" || ev.Revision != rev {
		t.Fatalf("got %+v, want DELETED a at %d (became undecodable)", ev, rev)
	}
	objs, _, err := c.List(ctx, "", rev, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Fatalf("cacher lists undecodable objects: %v", keysOf(objs))
	}
}

// TestCacherGet: a point read finds exactly the key (not a key it is a
// prefix of), sees creations, updates and deletions at the revision it
// waits for, and works with relative and full keys.
func TestCacherGet(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	c := startCacher(t, s, p, storage.CacherOptions{})
	rev := must[int64](t)(s.Create(ctx, p+"ns/a-long", encodeObj(nil, "long")))
	if _, ok, _, err := c.Get(ctx, "ns/a", rev); err != nil || ok {
		t.Fatalf("Get of a key only a prefix of another: ok=%v err=%v", ok, err)
	}
	rev = must[int64](t)(s.Create(ctx, p+"ns/a", encodeObj(nil, "one")))
	for _, key := range []string{"ns/a", p + "ns/a"} {
		o, ok, at, err := c.Get(ctx, key, rev)
		if err != nil || !ok || o.Fields["data"] != "one" || o.ModRevision != rev || at < rev {
			t.Fatalf("Get(%q) = %+v ok=%v rev=%d err=%v", key, o, ok, at, err)
		}
	}
	rev, _, err := s.Delete(ctx, p+"ns/a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _, err := c.Get(ctx, "ns/a", rev); err != nil || ok {
		t.Fatalf("Get after delete: ok=%v err=%v", ok, err)
	}
}
