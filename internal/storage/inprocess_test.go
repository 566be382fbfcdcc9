package storage_test

import (
	"testing"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

// TestInProcessClient: the API server of allot up talks to its embedded
// member through the in-process client; transactions, watches and the
// cacher's progress requests must work over it as over gRPC.
func TestInProcessClient(t *testing.T) {
	c := sharedEmbedded.InProcessClient()
	t.Cleanup(func() { _ = c.Close() })
	ctx, s, p := testCtx(t), storage.New(c), storagetest.Prefix(t)
	rev := must[int64](t)(s.Create(ctx, p+"a", []byte(`{"data":"1"}`)))
	if _, err := s.Txn(ctx, []storage.Op{storage.Update(p+"a", []byte(`{"data":"2"}`), rev), storage.CheckModRevisionAtMost(p+"fence", rev)}); err != nil {
		t.Fatal(err)
	}
	cacher := startCacher(t, s, p, storage.CacherOptions{})
	ch, err := cacher.Watch(ctx, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	must[int64](t)(s.Create(ctx, p+"b", []byte(`{"data":"3"}`)))
	if got := collect(t, ch, 1); len(got) != 1 {
		t.Fatalf("watch over the in-process client got %v", got)
	}
	outside := must[int64](t)(s.Create(ctx, "/outside"+p, nil))
	eventually(t, "list at a revision written elsewhere", func() error {
		_, _, err := cacher.List(ctx, "", outside, nil)
		return err
	})
}
