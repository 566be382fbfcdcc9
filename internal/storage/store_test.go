package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

func TestCRUDAndConflicts(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	key := p + "ns/a"

	_, err := s.Get(ctx, key)
	mustErrIs(t, err, storage.ErrNotFound)

	rev1 := must[int64](t)(s.Create(ctx, key, []byte("v1")))
	_, err = s.Create(ctx, key, []byte("again"))
	mustErrIs(t, err, storage.ErrExists)

	kv := must[storage.KV](t)(s.Get(ctx, key))
	if string(kv.Value) != "v1" || kv.ModRevision != rev1 || kv.CreateRevision != rev1 {
		t.Fatalf("got %+v, want value v1 at revision %d", kv, rev1)
	}

	rev2 := must[int64](t)(s.Update(ctx, key, []byte("v2"), rev1))
	if rev2 <= rev1 {
		t.Fatalf("update revision %d not after %d", rev2, rev1)
	}
	_, err = s.Update(ctx, key, []byte("stale"), rev1)
	mustErrIs(t, err, storage.ErrConflict)
	rev3 := must[int64](t)(s.Update(ctx, key, []byte("v3"), 0))
	_, err = s.Update(ctx, p+"ns/missing", []byte("x"), 0)
	mustErrIs(t, err, storage.ErrNotFound)
	_, err = s.Update(ctx, p+"ns/missing", []byte("x"), rev1)
	mustErrIs(t, err, storage.ErrNotFound)

	_, _, err = s.Delete(ctx, key, rev2)
	mustErrIs(t, err, storage.ErrConflict)
	drev, prev, err := s.Delete(ctx, key, rev3)
	if err != nil {
		t.Fatal(err)
	}
	if drev <= rev3 || string(prev.Value) != "v3" || prev.ModRevision != rev3 {
		t.Fatalf("delete returned rev %d prev %+v", drev, prev)
	}
	_, _, err = s.Delete(ctx, key, 0)
	mustErrIs(t, err, storage.ErrNotFound)
	_, _, err = s.Delete(ctx, key, rev3)
	mustErrIs(t, err, storage.ErrNotFound)

	// Unconditional delete of an existing key.
	must[int64](t)(s.Create(ctx, key, []byte("v4")))
	if _, _, err := s.Delete(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	cur := must[int64](t)(s.CurrentRevision(ctx))
	if cur < drev {
		t.Fatalf("current revision %d < %d", cur, drev)
	}
}

func TestValueSizeLimit(t *testing.T) {
	ctx, p := testCtx(t), storagetest.Prefix(t)
	s := newStore()
	big := bytes.Repeat([]byte("x"), storage.DefaultMaxValueBytes+1)
	_, err := s.Create(ctx, p+"big", big)
	mustErrIs(t, err, storage.ErrTooLarge)
	// Exactly the limit is accepted by the embedded etcd.
	must[int64](t)(s.Create(ctx, p+"max", big[:storage.DefaultMaxValueBytes]))

	small := newStore(storage.WithMaxValueBytes(10))
	_, err = small.Create(ctx, p+"a", []byte("01234567890"))
	mustErrIs(t, err, storage.ErrTooLarge)
	rev := must[int64](t)(small.Create(ctx, p+"a", []byte("0123456789")))
	_, err = small.Update(ctx, p+"a", []byte("01234567890"), rev)
	mustErrIs(t, err, storage.ErrTooLarge)
	_, err = small.Txn(ctx, []storage.Op{storage.Put(p+"b", []byte("01234567890"))})
	mustErrIs(t, err, storage.ErrTooLarge)
}

func TestTxnAtomicityAndErrorIndex(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	existing := must[int64](t)(s.Create(ctx, p+"existing", []byte("e")))

	cases := []struct {
		name   string
		ops    []storage.Op
		index  int
		reason error
	}{
		{"create exists", []storage.Op{storage.Create(p+"new1", []byte("1")), storage.Create(p+"existing", []byte("x"))}, 1, storage.ErrExists},
		{"update conflict", []storage.Op{storage.Put(p+"new1", []byte("1")), storage.Update(p+"existing", []byte("x"), existing+100)}, 1, storage.ErrConflict},
		{"update missing", []storage.Op{storage.Update(p+"gone", []byte("x"), 0), storage.Create(p+"new1", nil)}, 0, storage.ErrNotFound},
		{"delete conflict", []storage.Op{storage.Create(p+"new1", nil), storage.Put(p+"new2", nil), storage.Delete(p+"existing", existing-1)}, 2, storage.ErrConflict},
		{"check absent", []storage.Op{storage.Check(p+"existing", 0), storage.Create(p+"new1", nil)}, 0, storage.ErrExists},
		{"check missing", []storage.Op{storage.Create(p+"new1", nil), storage.Check(p+"gone", 5)}, 1, storage.ErrNotFound},
		{"fence", []storage.Op{storage.Create(p+"new1", nil), storage.CheckModRevisionAtMost(p+"existing", existing-1)}, 1, storage.ErrConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Txn(ctx, tc.ops)
			var te *storage.TxnError
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want *TxnError", err)
			}
			if te.Index != tc.index || te.Key != tc.ops[tc.index].Key || !errors.Is(err, tc.reason) {
				t.Fatalf("got %+v, want index %d reason %v", te, tc.index, tc.reason)
			}
			// The failing key's state comes with the error.
			wantValue, wantRev := []byte(nil), int64(0)
			if te.Key == p+"existing" {
				wantValue, wantRev = []byte("e"), existing
			}
			if string(te.Value) != string(wantValue) || (te.Value == nil) != (wantValue == nil) || te.ModRevision != wantRev {
				t.Fatalf("failing key %s: value %q at %d, want %q at %d", te.Key, te.Value, te.ModRevision, wantValue, wantRev)
			}
			// Nothing of the failed transaction was applied.
			for _, k := range []string{p + "new1", p + "new2"} {
				if _, err := s.Get(ctx, k); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("%s exists after failed txn (err %v)", k, err)
				}
			}
		})
	}

	rev, err := s.Txn(ctx, []storage.Op{
		storage.Check(p+"existing", existing),
		storage.CheckModRevisionAtMost(p+"absent-fence", 1),
		storage.Create(p+"a", []byte("a")),
		storage.Put(p+"b", []byte("b")),
		storage.Update(p+"existing", []byte("e2"), 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	res := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{}))
	if len(res.Items) != 3 {
		t.Fatalf("got %d items, want 3", len(res.Items))
	}
	for _, kv := range res.Items {
		if kv.ModRevision != rev {
			t.Fatalf("%s at %d, want all writes at txn revision %d", kv.Key, kv.ModRevision, rev)
		}
	}
	if _, err := s.Txn(ctx, []storage.Op{storage.Delete(p+"a", rev), storage.Delete(p+"b", 0)}); err != nil {
		t.Fatal(err)
	}
}

// Two writers race on the same fence many times: each reads the fence
// revision r0, then commits {fence <= r0, put fence, create own claim}.
// Exactly one must win every round.
func TestFenceRace(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	fence := p + "fence"
	const rounds = 50
	for round := range rounds {
		var r0 int64
		if kv, err := s.Get(ctx, fence); err == nil {
			r0 = kv.ModRevision
		} else if !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, who := range []string{"A", "B"} {
			wg.Go(func() {
				<-start
				_, errs[i] = s.Txn(ctx, []storage.Op{
					storage.CheckModRevisionAtMost(fence, r0),
					storage.Put(fence, []byte(who)),
					storage.Create(fmt.Sprintf("%sclaim/%d/%s", p, round, who), []byte(who)),
				})
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			var te *storage.TxnError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &te) && te.Index == 0 && errors.Is(err, storage.ErrConflict):
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, wins)
		}
		res := must[storage.ListResult](t)(s.List(ctx, fmt.Sprintf("%sclaim/%d/", p, round), storage.ListOptions{}))
		if len(res.Items) != 1 {
			t.Fatalf("round %d: %d claims stored, want 1", round, len(res.Items))
		}
	}
}

func TestListPaginationConsistentUnderWrites(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	for i := range 60 {
		must[int64](t)(s.Create(ctx, fmt.Sprintf("%sns%d/obj%03d", p, i%3, i), []byte("v0")))
	}
	first := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{Limit: 7}))
	snapshot := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{Revision: first.Revision}))

	// Writers churn the prefix while the remaining pages are read.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("%sns%d/obj%03d", p, i%3, i%60)
			if _, err := s.Update(ctx, key, fmt.Appendf(nil, "v%d", i), 0); err != nil && !errors.Is(err, storage.ErrNotFound) {
				t.Error(err)
				return
			}
			if _, err := s.Create(ctx, fmt.Sprintf("%sns%d/new%04d", p, i%3, i), nil); err != nil {
				t.Error(err)
				return
			}
			if i%5 == 0 {
				_, _, _ = s.Delete(ctx, fmt.Sprintf("%sns%d/obj%03d", p, i%3, (i*7)%60), 0) // may already be gone
			}
		}
	})
	items := append([]storage.KV(nil), first.Items...)
	page := first
	for page.Continue != "" {
		if page.RemainingItemCount == nil {
			t.Fatal("RemainingItemCount unset on a non-final page")
		}
		next, err := s.List(ctx, p, storage.ListOptions{Limit: 7, Continue: page.Continue})
		if err != nil {
			t.Fatal(err)
		}
		if next.Revision != first.Revision {
			t.Fatalf("page at revision %d, first page at %d", next.Revision, first.Revision)
		}
		if want := *page.RemainingItemCount; int64(len(next.Items))+remaining(next) != want {
			t.Fatalf("remaining count %d, next page has %d + %d", want, len(next.Items), remaining(next))
		}
		items = append(items, next.Items...)
		page = next
		time.Sleep(5 * time.Millisecond) // let the writers interleave
	}
	close(stop)
	wg.Wait()
	if len(items) != len(snapshot.Items) {
		t.Fatalf("paged %d items, snapshot has %d", len(items), len(snapshot.Items))
	}
	for i := range items {
		if items[i].Key != snapshot.Items[i].Key || items[i].ModRevision != snapshot.Items[i].ModRevision {
			t.Fatalf("item %d: paged %s@%d, snapshot %s@%d", i, items[i].Key, items[i].ModRevision, snapshot.Items[i].Key, snapshot.Items[i].ModRevision)
		}
	}
	if !sort.SliceIsSorted(items, func(i, j int) bool { return items[i].Key < items[j].Key }) {
		t.Fatal("items not in key order")
	}
}

func remaining(r storage.ListResult) int64 {
	if r.RemainingItemCount == nil {
		return 0
	}
	return *r.RemainingItemCount
}

func TestListOptionsValidation(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	for i := range 3 {
		must[int64](t)(s.Create(ctx, fmt.Sprintf("%sk%d", p, i), nil))
	}
	_, err := s.List(ctx, p, storage.ListOptions{Continue: "!!not-base64"})
	mustErrIs(t, err, storage.ErrInvalidContinue)
	page := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{Limit: 1}))
	_, err = s.List(ctx, p, storage.ListOptions{Continue: page.Continue, Revision: page.Revision + 1})
	mustErrIs(t, err, storage.ErrInvalidContinue)
	// A token cannot reach outside the listed prefix.
	other := must[storage.ListResult](t)(s.List(ctx, p+"k1", storage.ListOptions{Limit: 1, Continue: page.Continue}))
	for _, kv := range other.Items {
		if !strings.HasPrefix(kv.Key, p+"k1") {
			t.Fatalf("listed %s outside prefix", kv.Key)
		}
	}
	cur := must[int64](t)(s.CurrentRevision(ctx))
	_, err = s.List(ctx, p, storage.ListOptions{Revision: cur + 1000})
	mustErrIs(t, err, storage.ErrFutureRevision)
}

// A serializable List of a single member reads the same as a linearizable
// one, writes acknowledged before it included.
func TestListSerializable(t *testing.T) {
	ctx, s, p := testCtx(t), newStore(), storagetest.Prefix(t)
	for i := range 5 {
		must[int64](t)(s.Create(ctx, fmt.Sprintf("%sobj%d", p, i), fmt.Appendf(nil, "v%d", i)))
		ser := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{Serializable: true}))
		lin := must[storage.ListResult](t)(s.List(ctx, p, storage.ListOptions{}))
		if len(ser.Items) != i+1 || len(lin.Items) != i+1 {
			t.Fatalf("after %d creates: serializable %d items, linearizable %d", i+1, len(ser.Items), len(lin.Items))
		}
		for j := range ser.Items {
			if ser.Items[j].Key != lin.Items[j].Key || string(ser.Items[j].Value) != string(lin.Items[j].Value) {
				t.Fatalf("item %d differs: %s=%s vs %s=%s", j, ser.Items[j].Key, ser.Items[j].Value, lin.Items[j].Key, lin.Items[j].Value)
			}
		}
	}
}
