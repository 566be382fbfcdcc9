// Package queue is the scheduler's queue of pending pods, with three
// places, a gate and an in-flight state:
//
//	active         ready to be tried: highest priority first, then oldest
//	               entry into the queue
//	backoff        failed recently; moves to active when its backoff ends
//	               (InitialBackoff doubling per attempt, up to MaxBackoff),
//	               or, for a pod an event moved here (not after an error),
//	               as soon as Pop finds active empty: an idle scheduler
//	               does not wait out backoffs (as kube-scheduler's
//	               SchedulerPopFromBackoffQ)
//	unschedulable  fit no node; moves back only on a cluster event that a
//	               plugin which rejected it registered (and whose hint says
//	               Queue), on a change to the pod's spec or labels, or after
//	               UnschedulableTimeout (the safety net)
//	gated          refused by Options.Gate (PreEnqueue) when it entered:
//	               never tried until an update of the pod passes the gate
//	in flight      popped, being scheduled or bound
//
// The owner does, in order: New(Options) with the framework's
// EventsToRegister; Run(ctx) in a goroutine (it ends backoffs on time,
// runs the safety net, and closes the queue when ctx ends); Add, Update
// and Delete from the pod informer; OnEvent for every other cluster event;
// Pop in the scheduling loop, ending every attempt with exactly one of
// Done (bound), Unschedulable (no fit, or Wait) or Backoff (error).
//
// Events and pod changes that arrive while a pod is in flight are
// recorded, so an attempt that ends "unschedulable" after the cluster
// changed under it is retried instead of parked on stale information. A
// pod deleted while in flight is dropped when its attempt ends. Waiting
// pods (framework.Wait) skip backoff when they move.
//
// The queue is safe for concurrent use. It starts no goroutine except in
// Run; tests drive it with a fake clock and Flush.
package queue
