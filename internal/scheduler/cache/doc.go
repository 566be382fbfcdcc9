// Package cache is the scheduler's view of nodes and of the pods that hold
// resources on them, and the source of each cycle's snapshot.
//
// The owner does: AddNode, UpdateNode, RemoveNode, AddPod, UpdatePod and
// RemovePod from the informers (bound, non-terminated pods only); in the
// scheduling loop, Snapshot at the start of a cycle and AssumePod for the
// chosen node before binding starts; ForgetPod when the binding fails. An
// assumed pod is confirmed when the informer reports it bound (AddPod or
// UpdatePod with the same UID), wherever it was bound; it never expires
// on its own.
//
// Snapshot clones only the nodes that changed since the last call (by
// generation) and shares the rest, so a cycle costs O(nodes) pointer
// copies, not a deep copy of the cluster. Snapshots are immutable; the
// cache never touches a NodeInfo it has handed out. The cache is safe for
// concurrent use.
package cache
