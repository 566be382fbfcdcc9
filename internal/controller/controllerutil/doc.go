// Package controllerutil holds the small pieces that allot's controllers
// share: the worker loop over a typed rate-limited work queue, informers
// built on client-go list/watch functions, and resource discovery.
//
// Controllers follow one shape: event handlers decide whether an object
// needs work and enqueue its key; workers pop keys and sync one object at a
// time (see RunWorker); a failed sync is re-queued with rate limiting, a
// successful one forgets the key's failure history.
//
// An API server restart is ridden out without back-off: the informers'
// list and watch requests that cannot reach it are retried at most a
// second apart (client.RetryWhileUnreachable), and a sync that failed for
// that reason is re-queued after UnreachableRetry without a step of the
// key's exponential back-off, so the controllers resume within about a
// second of the server's return (see docs/operator-guide.md).
package controllerutil
