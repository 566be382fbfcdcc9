package controllerutil

import (
	"context"
	"errors"
	"log/slog"

	"k8s.io/client-go/util/workqueue"

	"allot.dev/allot/pkg/client"
)

// UnreachableRetry is how soon a key whose sync failed because the API
// server could not be reached (client.Unreachable) is synced again. Such
// failures do not count toward the key's exponential back-off.
const UnreachableRetry = client.UnreachableRetryMax

// ErrWait marks an expected wait (content still terminating, say): the key
// is re-queued with rate limiting like after any error, but the wait is
// logged at debug level only.
var ErrWait = errors.New("waiting")

// SyncFunc syncs the object behind one queue key. An error re-queues the
// key with rate limiting (an unreachable API server: after
// UnreachableRetry); nil forgets its failures.
type SyncFunc[T comparable] func(ctx context.Context, key T) error

// RunWorker pops keys from q and syncs them until q shuts down. Callers
// shut q down when ctx ends.
func RunWorker[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T], sync SyncFunc[T], log *slog.Logger) {
	for ProcessNext(ctx, q, sync, log) {
	}
}

// ProcessNext syncs one key. It returns false once the queue is shut down.
func ProcessNext[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T], sync SyncFunc[T], log *slog.Logger) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return true
		}
		if client.Unreachable(err) {
			// The API server is down or restarting: retry within a
			// second, without growing the key's back-off (which reaches
			// a minute and more), so that the work resumes as soon as the
			// server is back.
			log.Debug("API server unreachable, will retry", "key", key, "err", err)
			q.AddAfter(key, UnreachableRetry)
			return true
		}
		if errors.Is(err, ErrWait) {
			log.Debug("waiting", "key", key, "retries", q.NumRequeues(key), "reason", err)
		} else {
			log.Info("sync failed, will retry", "key", key, "retries", q.NumRequeues(key), "err", err)
		}
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// ShutDownOnDone shuts q down when ctx ends, so that workers return.
func ShutDownOnDone[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T]) {
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
}
