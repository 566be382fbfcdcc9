package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// fillUntilNoSpace writes values of size bytes under prefix until a write
// fails; the failure must be a *storage.NoSpaceError, which it returns,
// with the keys written.
func fillUntilNoSpace(t *testing.T, s *storage.Store, prefix string, size, max int) (*storage.NoSpaceError, []string) {
	t.Helper()
	ctx := testCtx(t)
	val := bytes.Repeat([]byte("x"), size)
	var keys []string
	for i := 0; i < max; i++ {
		key := fmt.Sprintf("%s%05d", prefix, i)
		_, err := s.Create(ctx, key, val)
		if err == nil {
			keys = append(keys, key)
			continue
		}
		var ns *storage.NoSpaceError
		if !errors.As(err, &ns) || !errors.Is(err, storage.ErrNoSpace) {
			t.Fatalf("write %d failed with %v, want a NoSpaceError", i, err)
		}
		return ns, keys
	}
	t.Fatalf("%d writes of %d bytes never ran out of space", max, size)
	return nil, nil
}

// TestQuotaNoSpace fills an embedded etcd up to its backend quota: etcd
// raises its NOSPACE alarm, writes fail with ErrNoSpace naming the
// condition, reads and deletes still work, and once objects are deleted
// the member compacts, defragments and disarms the alarm by itself; the
// data written before is all there.
func TestQuotaNoSpace(t *testing.T) {
	ctx := testCtx(t)
	var logs logBuffer
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{
		DataDir: t.TempDir(), Logger: logs.logger(), UnsafeNoFsync: true,
		QuotaBackendBytes: 8 << 20, SpaceCheckInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := storage.New(storagetest.NewClient(t, e.Endpoints()))
	kept := must[int64](t)(s.Create(ctx, "/quota/kept", []byte("kept")))

	ns, filled := fillUntilNoSpace(t, s, "/quota/fill/", 100<<10, 1000)
	if !strings.Contains(ns.Error(), "database space exceeded") {
		t.Fatalf("no-space error %q does not name the condition", ns)
	}
	t.Logf("refused after %d writes: %v", len(filled), ns)
	// Reads are served; updates are refused too.
	if kv := must[storage.KV](t)(s.Get(ctx, "/quota/kept")); string(kv.Value) != "kept" {
		t.Fatalf("read %q", kv.Value)
	}
	if _, err := s.Update(ctx, "/quota/kept", []byte("v2"), kept); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("update under the alarm: %v, want ErrNoSpace", err)
	}
	// etcd stores the write that crosses the quota and still answers it
	// with "database space exceeded" (its quota applier checks before
	// applying and reports after): the refused key may be there.
	res := must[storage.ListResult](t)(s.List(ctx, "/quota/fill/", storage.ListOptions{}))
	if n := len(res.Items); n != len(filled) && n != len(filled)+1 {
		t.Fatalf("list under the alarm: %d keys, want %d or %d", n, len(filled), len(filled)+1)
	}
	for i, k := range filled {
		if res.Items[i].Key != k {
			t.Fatalf("list under the alarm: key %d is %s, want %s", i, res.Items[i].Key, k)
		}
	}
	// Deletes work under the alarm; once the database has room again the
	// member recovers by itself.
	for _, kv := range res.Items {
		must[int64](t)(deleteKey(t, s, kv.Key))
	}
	eventually(t, "a write after deleting the filler", func() error {
		_, err := s.Update(ctx, "/quota/kept", []byte("v2"), kept)
		return err
	})
	if kv := must[storage.KV](t)(s.Get(ctx, "/quota/kept")); string(kv.Value) != "v2" {
		t.Fatalf("after recovery read %q", kv.Value)
	}
	out := logs.String()
	for _, want := range []string{"NOSPACE alarm is active", "NOSPACE alarm disarmed"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("log has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
		}
	}
}

func deleteKey(t *testing.T, s *storage.Store, key string) (int64, error) {
	rev, _, err := s.Delete(testCtx(t), key, 0)
	return rev, err
}

// TestDiskGuardFillsNoFurther fills a small tmpfs holding an embedded
// etcd with writes through a guarded Store: the guard refuses them with
// ErrNoSpace before etcd's own writes fail (etcd ends the process on
// ENOSPC: without the guard this test binary dies), reads are served, and
// once the disk grows every key written is there and writes work again.
func TestDiskGuardFillsNoFurther(t *testing.T) {
	dir := storagetest.Tmpfs(t, 256)
	ctx := testCtx(t)
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{
		DataDir: dir + "/etcd", Logger: storagetest.QuietLogger(), UnsafeNoFsync: true,
		DiskReserveBytes: 80 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := storage.New(e.InProcessClient(), storage.WithWriteGuard(e.CheckSpace))
	ns, filled := fillUntilNoSpace(t, s, "/disk/fill/", 200<<10, 5000)
	if !strings.Contains(ns.Error(), "below the 80.0 MiB allot keeps free") || !strings.Contains(ns.Error(), dir) {
		t.Fatalf("no-space error %q does not name the condition", ns)
	}
	t.Logf("refused after %d writes: %v", len(filled), ns)
	if res := must[storage.ListResult](t)(s.List(ctx, "/disk/", storage.ListOptions{})); len(res.Items) != len(filled) {
		t.Fatalf("list on a full disk: %d keys, want %d", len(res.Items), len(filled))
	}

	storagetest.ResizeTmpfs(t, dir, 512)
	must[int64](t)(s.Create(ctx, "/disk/after", []byte("x")))
	res := must[storage.ListResult](t)(s.List(ctx, "/disk/fill/", storage.ListOptions{}))
	if len(res.Items) != len(filled) {
		t.Fatalf("after the disk grew: %d keys, want %d", len(res.Items), len(filled))
	}
}

// TestDiskGuardOtherFiles: the disk fills with another program's file;
// writes are refused, reads served, and they work again once it is gone.
// The guard lets writes through only with a quarter of the reserve more
// than the reserve free, so a disk at the edge does not flap.
func TestDiskGuardOtherFiles(t *testing.T) {
	dir := storagetest.Tmpfs(t, 256)
	ctx := testCtx(t)
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{
		DataDir: dir + "/etcd", Logger: storagetest.QuietLogger(), UnsafeNoFsync: true,
		DiskReserveBytes: 40 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := storage.New(e.InProcessClient(), storage.WithWriteGuard(e.CheckSpace))
	rev := must[int64](t)(s.Create(ctx, "/other/kept", []byte("kept")))

	release := storagetest.FillDisk(t, dir, 30<<20)
	if _, err := s.Update(ctx, "/other/kept", []byte("v2"), rev); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("write on a full disk: %v, want ErrNoSpace", err)
	}
	if kv := must[storage.KV](t)(s.Get(ctx, "/other/kept")); string(kv.Value) != "kept" {
		t.Fatalf("read %q", kv.Value)
	}
	release()
	must[int64](t)(s.Update(ctx, "/other/kept", []byte("v2"), rev))
}
