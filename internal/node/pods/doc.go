// Package pods is the pod worker of the node agent: one Worker per pod,
// the only goroutine that acts on the pod's containers and writes its
// status. The agent's dispatcher feeds it (Update, Gone, Poke); Run loops
// over Sync until the pod's deletion is complete.
//
// Each Sync observes the containers (Runtime.Status), acts, and reports:
//
//   - Running pod: init containers one at a time in spec order, each to a
//     successful exit; then every container, created and started in spec
//     order. An exit is handled once: by the restart policy (init
//     containers restart on failure unless the policy is Never) a
//     container is done, or restarts as attempt+1 after a back-off that
//     starts at Timing.RestartBackoffInitial and doubles up to
//     Timing.RestartBackoffMax (reset after an attempt that ran twice the
//     maximum). While backing off its state is waiting/CrashLoopBackOff.
//     Failed creations (CreateContainerConfigError, CreateContainerError,
//     RunContainerError) retry with the same back-off. Admitters are asked
//     before the worker's first creation; they may hold the pod Pending or
//     reject it (Failed). Monitors are asked at every sync whether the
//     pod must fail now (a device it holds went unhealthy); a failure is
//     final, like a rejection. spec.activeDeadlineSeconds fails the pod
//     with DeadlineExceeded.
//   - Finished pod (Succeeded or Failed): containers still running are
//     stopped, Releasers are called, and after Timing.TerminatedCleanup the
//     containers are removed; the status and logs stay. A pod finished
//     before the worker started (its API phase, or the checkpoint) never
//     runs again, and its API status is left as it is.
//   - Deleted pod (deletionTimestamp set, or gone from the API): every
//     container is stopped in parallel with grace min(deletionGracePeriod,
//     terminationGracePeriod) capped by Timing.MaxGracePeriod (the runtime
//     sends TERM, waits, then KILL); the final status is written;
//     Releasers are called; containers are removed; the deletion is
//     completed with DELETE gracePeriodSeconds=0 and a UID precondition;
//     the pod's files are deleted and Run returns.
//
// The status (phase, the Initialized/ContainersReady/Ready conditions,
// container statuses, hostIP, podIP, startTime) is computed from the
// worker's memory over the API's status, whose other fields and
// conditions are kept, and written only when it differs from the API's,
// retrying conflicts with a fresh read. Times are kept at the API's
// second precision so that a status read back compares equal.
//
// What has finished (init containers that succeeded, containers that will
// not restart, the pod's final phase) is checkpointed under the root
// directory (package podfiles), so that after an agent restart or a
// reboot nothing finished runs again. Running containers found at start
// are adopted by (pod UID, container name, highest attempt).
package pods
