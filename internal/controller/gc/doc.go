// Package gc is allot's owner-reference garbage collector: it deletes
// objects whose owners are gone, and carries out the orphan and foreground
// propagation policies that the API server records as the finalizers
// "orphan" and "foregroundDeletion" when an owner is deleted.
//
// # Contract
//
//   - The collector watches every served resource that supports list,
//     watch and delete (found through discovery; re-discovered every
//     Options.RediscoveryInterval and whenever a CustomResourceDefinition
//     changes) and keeps an in-memory graph of owner references: object
//     uid -> identity and owners, owner uid -> dependents.
//   - It never deletes an object that has an existing owner. Before acting
//     on a missing or deleting owner it reads the owner with a live GET by
//     name and compares the uid, so a stale cache, or an owner that appears
//     in the cache after its dependent, never causes a deletion. An owner
//     reference whose kind is not served is retried, never treated as gone.
//   - A dependent all of whose owners are gone (or are being deleted in the
//     foreground) is deleted with propagationPolicy Background (Foreground
//     when an owner waits for it and it has dependents of its own), with
//     the uid and resourceVersion it was judged by as preconditions. A
//     dependent that still has an existing owner only loses the references
//     to the gone owners, through a JSON merge patch of
//     metadata.ownerReferences guarded by its resourceVersion.
//   - Owner deleted with finalizer "orphan": the owner's reference is
//     removed from every dependent, then the finalizer from the owner.
//   - Owner deleted with finalizer "foregroundDeletion": every dependent is
//     deleted; once no dependent with blockOwnerDeletion=true remains the
//     finalizer is removed (best effort: a dependent the watch has not
//     delivered yet does not block).
//   - Background deletion (the default) needs nothing from the owner: the
//     server deletes it at once and the collector then deletes dependents
//     whose owners are all gone; dependents of dependents follow in turn.
//
// # Flow
//
// Informer event handlers update the graph (graph.go, a pure structure
// without goroutines or I/O) and enqueue the uids that need a decision into
// two typed rate-limited queues: "check" (is this object's owner gone? is
// this foreground owner done?) and "orphan". Workers pop one key, read the
// live objects, act, and re-queue with rate limiting on failure.
//
// Lists, watches, reads and deletes use client-go's metadata client, so the
// collector caches only PartialObjectMetadata; patches use the dynamic
// client (see patchMeta).
package gc
