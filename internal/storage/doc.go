// Package storage is allot's etcd v3 storage layer: a byte-level,
// type-agnostic key/value store for a Kubernetes-style API server, an
// embedded single-member etcd, and an in-memory watch cache.
//
// # Contract
//
// Values are opaque bytes (the API server stores JSON); keys are chosen by
// the caller, conventionally /registry/<group>/<resource>/<namespace>/<name>.
// A resourceVersion is an etcd revision: the ModRevision of a key for a
// single object, and the store revision a List was read at for a list.
//
// Errors are reported through sentinels that callers test with errors.Is:
//
//   - ErrNotFound: the key does not exist (404).
//   - ErrExists: Create of an existing key (409 AlreadyExists).
//   - ErrConflict: the key's ModRevision differs from the expected one
//     (409 Conflict).
//   - ErrCompacted: the requested revision was compacted; for a List with a
//     continue token the caller answers 410 Gone "continue token expired",
//     for a watch 410 Gone "too old resource version".
//   - ErrTooLarge: a value exceeds the configured maximum (413).
//   - ErrFutureRevision: a revision newer than the store (or a watch cache)
//     has reached was requested; retry later (504 "Too large resource
//     version").
//   - ErrInvalidContinue: a continue token is malformed or does not belong
//     to the listed prefix (400).
//   - ErrNoSpace: etcd cannot write for want of space (507); a
//     *NoSpaceError names the condition: etcd's NOSPACE alarm ("database
//     space exceeded", its backend quota reached) or, with a write guard
//     (WithWriteGuard, Embedded.CheckSpace), the embedded member's disk
//     below the reserve. Reads and deletes still work.
//
// Transactions (Store.Txn) apply many Ops atomically; a failed compare is
// reported as a *TxnError naming the failing Op, which unwraps to
// ErrConflict, ErrExists or ErrNotFound.
//
// Lists are consistent snapshots: every page of a paginated List is read at
// the revision of the first page. Watches deliver every change with a
// revision greater than the requested one, in revision order; deletes carry
// the last value of the object.
//
// A Cacher keeps one etcd watch per resource prefix and serves List and
// Watch from memory, so N API watchers cost etcd a single watch. Its
// watchers see predicate transitions as Added/Deleted, are replayed from a
// ring buffer, and from etcd's history before it (ErrCompacted when etcd
// has compacted it or it is too long), and are closed rather than
// allowed to block the cache when they fall behind; after a re-list
// (compaction) all watchers are closed and clients re-watch.
//
// Every etcd call gets a deadline (WithRequestTimeout, default 30s) when
// the caller's context has none; watches are bounded only by the caller's
// context.
//
// An embedded member keeps DiskReserveBytes free on its disk: etcd ends
// the process when a write of its log or database fails with ENOSPC, so
// the Store of `allot up` refuses writes (ErrNoSpace) below the reserve
// instead, and takes them again once the disk has room. The member also
// recovers from its own NOSPACE alarm: once the disk has room it compacts,
// defragments and, with the database below 90% of its quota, disarms the
// alarm (see docs/operator-guide.md, "A full disk").
//
// StartEmbedded runs a single-member etcd in-process; NewClient connects to
// it or to an external cluster. Package storagetest has helpers for tests.
package storage
