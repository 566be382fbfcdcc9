// Package integration tests the scheduler against a real API server: its
// TestMain builds cmd/allot once, runs `allot up` as a child process (its
// own process group, stopped by PID), and each test runs the scheduler
// in-process with a unique schedulerName, creates nodes and pods through
// pkg/client, and checks bindings, conditions and events. It also runs
// `allot explain` against that server. The package has no non-test code.
package integration
