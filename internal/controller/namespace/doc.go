// Package namespace is allot's namespace deletion controller: it empties a
// namespace that is being deleted and then releases it.
//
// # Contract
//
// For every namespace with metadata.deletionTimestamp set whose
// spec.finalizers hold "kubernetes":
//
//  1. status.phase becomes Terminating (a status update) unless it is
//     already.
//  2. Every namespaced resource found through discovery (one version per
//     resource) that supports list and delete or deletecollection is
//     emptied in the namespace, with deletecollection where served, else
//     with a delete per object, with propagationPolicy Background.
//  3. The namespace is re-queued with backoff until no object remains:
//     pods bound to nodes stay until their node agent has stopped them,
//     and objects with finalizers until those are removed.
//  4. "kubernetes" is removed from spec.finalizers with a PUT to the
//     namespaces/NAME/finalize subresource, guarded by the namespace's
//     resourceVersion. The API server deletes the namespace once both
//     spec.finalizers and metadata.finalizers are empty.
//
// An incomplete discovery empties what it found but never finalizes.
//
// # Flow
//
// A metadata informer on namespaces enqueues the names of namespaces being
// deleted (and re-enqueues them every resync interval); workers pop one
// name and run the steps above. A namespace whose content is still
// terminating is re-queued with rate limiting (exponential backoff up to
// Options.MaxRetryDelay).
package namespace
