package hosts

import (
	"flag"
	"time"
)

// defaultTimers runs the suite with allot's default timers instead of the
// short ones, to measure recovery as an operator meets it. It takes
// minutes: a lost node is NotReady after 40 s and its pods are evicted
// 300 s later.
var defaultTimers = flag.Bool("hosts.default-timers", false,
	"run with allot's default timers (heartbeats, grace periods, tolerations, pod GC, leader election, fence): minutes, for measuring")

// timers are the flags and durations of one way to run the suite.
type timers struct {
	// Flags of each component that set its timers.
	agent, scheduler, manager []string
	// heartbeat is the node agents' --heartbeat-interval.
	heartbeat time.Duration
	// toleration is how long the pods a scenario loses tolerate their
	// node's loss; 0 leaves them the API server's default (300 s).
	toleration int64
	// fenceAfter and fenceMargin are the nodes' --self-fence-after and
	// the controller manager's margin, when the binary has the fence.
	fenceAfter, fenceMargin time.Duration
	// slack is added to every wait.
	slack time.Duration
}

// tm is the run's timers: short unless -hosts.default-timers.
var tm = shortTimers

// shortTimers are sub-second wherever a flag allows: leader election uses
// the shortest lease client-go takes (Leases hold whole seconds), a node
// is NotReady 2 s after its last heartbeat (every 250 ms).
var shortTimers = timers{
	agent: []string{"--heartbeat-interval", "250ms", "--node-lease-duration", "1s", "--relist-interval", "200ms",
		"--resync-interval", "2s", "--retry-interval", "200ms", "--api-timeout", "2s",
		"--admit-retry-interval", "200ms", "--terminated-pod-cleanup", "200ms", "--dra-slice-grace-period", "5s",
		"--dra-prepare-backoff-initial", "100ms", "--dra-prepare-backoff-max", "500ms", "--dra-prepare-timeout", "5s",
		"--shutdown-grace-period", "1s"},
	scheduler: []string{"--leader-elect-lease-duration", "1s", "--leader-elect-renew-deadline", "500ms", "--leader-elect-retry-period", "100ms",
		"--pod-initial-backoff", "100ms", "--pod-max-backoff", "500ms", "--unschedulable-timeout", "2s",
		"--api-timeout", "5s", "--bind-timeout", "5s"},
	manager: []string{"--leader-elect-lease-duration", "1s", "--leader-elect-renew-deadline", "500ms", "--leader-elect-retry-period", "100ms",
		"--node-monitor-grace-period", "2s", "--node-monitor-period", "100ms",
		"--node-eviction-rate", "10", "--pod-gc-period", "100ms", "--pod-gc-orphan-quarantine", "100ms",
		"--gc-rediscovery", "5s", "--gc-resync", "30s"},
	heartbeat:   250 * time.Millisecond,
	toleration:  1,
	fenceAfter:  time.Second,
	fenceMargin: 500 * time.Millisecond,
}

// defaults are allot's defaults (only the runtime's grace period is
// short, for the test's own cleanup).
var defaults = timers{
	agent:       []string{"--shutdown-grace-period", "1s"},
	heartbeat:   10 * time.Second,
	fenceAfter:  20 * time.Second,
	fenceMargin: 5 * time.Second,
	slack:       10 * time.Minute,
}
