// Package controllerutil holds the small pieces that allot's controllers
// share: the worker loop over a typed rate-limited work queue, informers
// built on client-go list/watch functions, and resource discovery.
//
// Controllers follow one shape: event handlers decide whether an object
// needs work and enqueue its key; workers pop keys and sync one object at a
// time (see RunWorker); a failed sync is re-queued with rate limiting, a
// successful one forgets the key's failure history.
package controllerutil
