package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sentinel errors; test with errors.Is.
var (
	ErrNotFound        = errors.New("storage: key not found")
	ErrExists          = errors.New("storage: key already exists")
	ErrConflict        = errors.New("storage: modification revision conflict")
	ErrCompacted       = errors.New("storage: revision has been compacted")
	ErrTooLarge        = errors.New("storage: value too large")
	ErrFutureRevision  = errors.New("storage: revision is newer than the store's current revision")
	ErrInvalidContinue = errors.New("storage: invalid continue token")
)

// DefaultMaxValueBytes is the default limit on a stored value, matching
// etcd's default request size limit (1.5 MiB).
const DefaultMaxValueBytes = 3 << 19

// DefaultRequestTimeout bounds an etcd call whose context has no deadline.
const DefaultRequestTimeout = 30 * time.Second

// KV is one stored key with its value and revisions.
type KV struct {
	Key            string
	Value          []byte
	ModRevision    int64
	CreateRevision int64
}

// Store is the etcd-backed key/value store. It is safe for concurrent use.
type Store struct {
	client         *clientv3.Client
	maxValueBytes  int
	requestTimeout time.Duration
	writeGuard     func() error
}

// Option configures a Store.
type Option func(*Store)

// WithMaxValueBytes sets the largest value accepted by writes; larger values
// fail with ErrTooLarge. n <= 0 keeps the default.
func WithMaxValueBytes(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.maxValueBytes = n
		}
	}
}

// WithRequestTimeout sets the deadline applied to etcd calls whose context
// has none. d <= 0 keeps the default.
func WithRequestTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.requestTimeout = d
		}
	}
}

// WithWriteGuard makes every write that stores a value (a Txn with a
// Create, Update or Put) first call guard and fail with its error when it
// returns one; deletes and checks pass, as under etcd's NOSPACE alarm.
// StartEmbedded's member offers Embedded.CheckSpace for it.
func WithWriteGuard(guard func() error) Option {
	return func(s *Store) { s.writeGuard = guard }
}

// New returns a Store using c. The caller keeps ownership of c.
func New(c *clientv3.Client, opts ...Option) *Store {
	s := &Store{client: c, maxValueBytes: DefaultMaxValueBytes, requestTimeout: DefaultRequestTimeout}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Client returns the underlying etcd client.
func (s *Store) Client() *clientv3.Client { return s.client }

// MaxValueBytes reports the configured value size limit.
func (s *Store) MaxValueBytes() int { return s.maxValueBytes }

// withTimeout adds the default deadline when ctx has none.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.requestTimeout)
}

func (s *Store) checkSize(key string, value []byte) error {
	if len(value) > s.maxValueBytes {
		return fmt.Errorf("check value of %q: %d bytes exceeds limit %d: %w", key, len(value), s.maxValueBytes, ErrTooLarge)
	}
	return nil
}

// mapErr translates etcd errors into the package sentinels, keeping the
// original error in the chain.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %w", ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: %w", ErrFutureRevision, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	if ns := noSpaceErr(err); ns != nil {
		return ns
	}
	return err
}

func kvFromPB(kv *mvccpb.KeyValue) KV {
	return KV{Key: string(kv.Key), Value: kv.Value, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision}
}

// Get returns the current value of key, or ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (KV, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return KV{}, fmt.Errorf("get %q: %w", key, mapErr(err))
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("get %q: %w", key, ErrNotFound)
	}
	return kvFromPB(resp.Kvs[0]), nil
}

// Create stores value under key if the key does not exist and returns the
// new revision, or ErrExists.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	rev, err := s.Txn(ctx, []Op{Create(key, value)})
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", key, unwrapTxn(err))
	}
	return rev, nil
}

// Update replaces the value of an existing key and returns the new
// revision. With expectedModRev != 0 the key's ModRevision must equal it
// (else ErrConflict); with 0 the update is unconditional but the key must
// exist. A missing key yields ErrNotFound.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedModRev int64) (int64, error) {
	rev, err := s.Txn(ctx, []Op{Update(key, value, expectedModRev)})
	if err != nil {
		return 0, fmt.Errorf("update %q: %w", key, unwrapTxn(err))
	}
	return rev, nil
}

// Delete removes key and returns the deletion revision and the last stored
// value. With expectedModRev != 0 the key's ModRevision must equal it (else
// ErrConflict). A missing key yields ErrNotFound.
func (s *Store) Delete(ctx context.Context, key string, expectedModRev int64) (int64, KV, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var cmp clientv3.Cmp
	if expectedModRev != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", expectedModRev)
	} else {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	}
	resp, err := s.client.Txn(ctx).If(cmp).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return 0, KV{}, fmt.Errorf("delete %q: %w", key, mapErr(err))
	}
	if !resp.Succeeded {
		if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
			return 0, KV{}, fmt.Errorf("delete %q: %w", key, ErrNotFound)
		}
		return 0, KV{}, fmt.Errorf("delete %q: %w", key, ErrConflict)
	}
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return 0, KV{}, fmt.Errorf("delete %q: %w", key, ErrNotFound)
	}
	return resp.Header.Revision, kvFromPB(prev[0]), nil
}

// CurrentRevision returns the store's current revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	// A count-only range read of a single key returns the store revision
	// in its header without transferring data.
	resp, err := s.client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read current revision: %w", mapErr(err))
	}
	return resp.Header.Revision, nil
}

// Compact discards history older than rev. Compacting to a revision at or
// below the current compaction point yields ErrCompacted.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if _, err := s.client.Compact(ctx, rev); err != nil {
		return fmt.Errorf("compact to revision %d: %w", rev, mapErr(err))
	}
	return nil
}

// unwrapTxn turns a single-op *TxnError into its plain sentinel so that
// single-key methods report "create "k": storage: key already exists".
func unwrapTxn(err error) error {
	var te *TxnError
	if errors.As(err, &te) {
		return te.Reason
	}
	return err
}
