package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/internal/storage"
)

// maxUpdateRetries bounds read-modify-write loops on conflicts.
const maxUpdateRetries = 16

// apiError maps storage errors to API status errors of the kind and name.
func apiError(k *kind, name string, err error) error {
	gr := k.groupResource()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	case errors.Is(err, storage.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError("object exceeds the maximum stored size")
	case errors.Is(err, storage.ErrFutureRevision):
		return apierrors.NewTimeoutError("too large resource version: "+err.Error(), 1)
	case errors.Is(err, storage.ErrInvalidContinue):
		return apierrors.NewBadRequest("invalid continue token: " + err.Error())
	case errors.Is(err, storage.ErrNotReady):
		return apierrors.NewServiceUnavailable("the watch cache is not ready: " + err.Error())
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired("resourceVersion too old: " + err.Error())
	case errors.Is(err, storage.ErrNoSpace):
		return noSpaceError(err)
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// errExtraConflict is a failure of a guard operation that accompanied a
// write (a quota, an epoch): the caller re-runs admission and retries.
var errExtraConflict = errors.New("a guarded object changed concurrently")

// getObj reads one object from etcd (a consistent read).
func (s *Server) getObj(ctx context.Context, k *kind, ns, name string) (runtime.Object, error) {
	kv, err := s.store.Get(ctx, k.storageKey(ns, name))
	if err != nil {
		return nil, apiError(k, name, err)
	}
	obj, err := decodeStored(k, kv.Value, kv.ModRevision)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// cachedGet reads one object from the watch cache (possibly slightly
// stale); NotFound when the cache does not have it.
func (s *Server) cachedGet(ctx context.Context, k *kind, ns, name string) (runtime.Object, error) {
	c, err := s.cacheFor(k)
	if err != nil {
		return nil, err
	}
	cached, ok, _, err := c.Get(ctx, k.storageKey(ns, name), 0)
	if err != nil {
		return nil, apiError(k, name, err)
	}
	if !ok {
		return nil, apierrors.NewNotFound(k.groupResource(), name)
	}
	if o, ok := cached.Decoded.Object.(runtime.Object); ok {
		cp := o.DeepCopyObject()
		setRV(cp, cached.KV.ModRevision)
		return cp, nil
	}
	obj, err := decodeStored(k, cached.KV.Value, cached.KV.ModRevision)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// revisionOf reads an object's resourceVersion as a number.
func revisionOf(obj runtime.Object) (int64, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return 0, fmt.Errorf("access metadata: %w", err)
	}
	return parseRV(acc.GetResourceVersion())
}

func setRV(obj runtime.Object, rev int64) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	}
}

// createObj stores a new object together with extra transaction operations
// (quota updates). It returns the object with its resourceVersion and its
// stored form.
func (s *Server) createObj(ctx context.Context, k *kind, obj runtime.Object, extra []storage.Op) (*created, error) {
	acc, _ := meta.Accessor(obj)
	data, err := encodeForStorage(k, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	ops := append([]storage.Op{storage.Create(k.storageKey(acc.GetNamespace(), acc.GetName()), data)}, extra...)
	rev, err := s.commit(ctx, ops)
	if err != nil {
		var te *storage.TxnError
		if errors.As(err, &te) && te.Index > 0 {
			return nil, fmt.Errorf("create %s: concurrent change of %s: %w", acc.GetName(), te.Key, errExtraConflict)
		}
		return nil, apiError(k, acc.GetName(), err)
	}
	if isDryRun(ctx) {
		return &created{obj: obj}, nil // as Kubernetes: no resourceVersion
	}
	setRV(obj, rev)
	return &created{obj: obj, stored: data, rev: rev}, nil
}

// created is a stored new object; its answer is the stored bytes with the
// resourceVersion spliced in, sparing a second encode. A dry run's has
// neither (stored is nil).
type created struct {
	obj    runtime.Object
	stored []byte
	rev    int64
}

func (c *created) json() []byte { return withRV(c.stored, c.rev) }

// writeObj replaces a stored object whose stored revision must be
// expectedRev, or deletes it when the object is being deleted and has no
// finalizers left. It returns the written object, or its last state if it
// was deleted; in a dry run, with the resourceVersion it had.
func (s *Server) writeObj(ctx context.Context, k *kind, obj runtime.Object, expectedRev int64, extra []storage.Op) (runtime.Object, error) {
	acc, _ := meta.Accessor(obj)
	key := k.storageKey(acc.GetNamespace(), acc.GetName())
	if acc.GetDeletionTimestamp() != nil && len(acc.GetFinalizers()) == 0 && !s.blocksDeletion(k, obj) {
		release, err := s.releaseQuota(ctx, k, obj)
		if err != nil {
			return nil, err
		}
		ops := append([]storage.Op{storage.Delete(key, expectedRev)}, release...)
		rev, err := s.commit(ctx, ops)
		if err != nil {
			return nil, apiError(k, acc.GetName(), unwrapFirst(err))
		}
		if !isDryRun(ctx) {
			setRV(obj, rev)
		}
		return obj, nil // the last state, as Kubernetes answers
	}
	data, err := encodeForStorage(k, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	ops := append([]storage.Op{storage.Update(key, data, expectedRev)}, extra...)
	rev, err := s.commit(ctx, ops)
	if err != nil {
		return nil, apiError(k, acc.GetName(), unwrapFirst(err))
	}
	if !isDryRun(ctx) {
		setRV(obj, rev)
	}
	return obj, nil
}

// unwrapFirst turns a failure of the first transaction operation into its
// sentinel, and a failure of a later one into a conflict.
func unwrapFirst(err error) error {
	var te *storage.TxnError
	if errors.As(err, &te) && te.Index > 0 {
		return fmt.Errorf("concurrent change of %s: %w", te.Key, storage.ErrConflict)
	}
	return err
}

// updateFunc computes the new state from the current one. Returning a nil
// object means "no change".
type updateFunc func(cur runtime.Object) (runtime.Object, []storage.Op, error)

// certain marks an update function's error as one a fresher read could
// not change: guaranteedUpdate answers it even when fn saw the watch
// cache's copy.
type certain struct{ error }

// guaranteedUpdate reads, applies fn and writes, retrying on conflicts.
func (s *Server) guaranteedUpdate(ctx context.Context, k *kind, ns, name string, fn updateFunc) (runtime.Object, error) {
	// The first attempt starts from the watch cache, which saves a read
	// and a decode from etcd: the write compares the revision, so a stale
	// copy only fails it. A stale copy could also mislead fn (a spurious
	// conflict, a refusal, "no change"), so then the update starts over
	// from etcd before anything is answered. Neither counts as a retry.
	tryCache := true
	for i := 0; ; {
		var cur runtime.Object
		cached := false
		if tryCache {
			tryCache = false
			if obj, err := s.cachedGet(ctx, k, ns, name); err == nil {
				cur, cached = obj, true
			}
		}
		if cur == nil {
			obj, err := s.getObj(ctx, k, ns, name)
			if err != nil {
				return nil, err
			}
			cur = obj
		}
		curRev, _ := revisionOf(cur)
		next, extra, err := fn(cur.DeepCopyObject())
		if c, ok := err.(certain); ok {
			return nil, c.error
		}
		if cached && (err != nil || next == nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		wk := k
		if isView(k, cur) {
			if next, err = s.unview(ctx, k, next, cur); err != nil {
				if apierrors.IsConflict(err) && (cached || i < maxUpdateRetries) {
					if !cached {
						i++
					}
					continue
				}
				return nil, err
			}
			wk = k.sibling
		}
		out, err := s.writeObj(ctx, wk, next, curRev, extra)
		if err == nil && wk != k {
			out, err = viewOf(k, out)
		}
		if apierrors.IsConflict(err) && (cached || i < maxUpdateRetries) {
			if !cached {
				i++
			}
			continue
		}
		return out, err
	}
}
