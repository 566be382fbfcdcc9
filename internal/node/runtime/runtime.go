// Package runtime is the contract between the node agent's pod workers and
// a container runtime: runc (real OCI containers with CDI device
// injection) or fake (simulated nodes, no processes).
//
// The agent owns pod lifecycle decisions (order, restarts, grace periods);
// a Runtime only creates, starts, inspects, stops and removes single
// containers, and lists what exists so that an agent restarted while
// containers run can adopt them instead of starting them again. Every
// method honours its context's deadline.
package runtime

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned for an unknown container ID.
var ErrNotFound = errors.New("container not found")

// Mount is a bind mount into a container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Device is a device node exposed in a container (device-plugin style).
type Device struct {
	HostPath      string
	ContainerPath string
	// Permissions are cgroup device permissions, any of "r", "w", "m".
	Permissions string
}

// ContainerSpec is everything needed to run one container of a pod.
type ContainerSpec struct {
	// Identity; the runtime records these so List can report them.
	PodUID       string
	PodNamespace string
	PodName      string
	Name         string
	// Attempt counts restarts of this container (0 first).
	Attempt int

	Image      string
	Command    []string
	Args       []string
	Env        []string // KEY=VALUE
	WorkingDir string

	// CDIDevices are fully qualified CDI device names
	// (vendor.com/class=name) whose edits the runtime injects.
	CDIDevices []string
	// Mounts, Devices, Annotations and extra Env come from device plugins'
	// Allocate responses.
	Mounts      []Mount
	Devices     []Device
	Annotations map[string]string

	// LogPath is the file the container's stdout and stderr go to.
	LogPath string

	// Fence, when set, asks the runtime to stop the container on its own
	// once the node agent's local heartbeat is older than Fence.After,
	// also while the agent is not running (runc: the container's shim
	// does it). Runtimes without a process of their own per container
	// (fake) ignore it: the agent's self-fence stops such containers.
	Fence *Fence
}

// Fence is a container's fence: HeartbeatFile is a file the node agent
// touches while it reaches the API server; once its modification time is
// older than After, the container is killed.
type Fence struct {
	HeartbeatFile string
	After         time.Duration
}

// State is a container's state.
type State string

// Container states.
const (
	StateCreated State = "Created"
	StateRunning State = "Running"
	StateExited  State = "Exited"
	StateUnknown State = "Unknown"
)

// ContainerStatus is what the runtime knows of a container.
type ContainerStatus struct {
	ID           string
	PodUID       string
	PodNamespace string
	PodName      string
	Name         string
	Attempt      int
	State        State
	PID          int
	ExitCode     int32
	// Signal is set when the process was killed by a signal.
	Signal     int32
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Reason is a short CamelCase reason (Completed, Error, OOMKilled,
	// StartError) and Message a sentence, for the pod's status.
	Reason  string
	Message string
}

// Runtime runs containers.
type Runtime interface {
	// Name is "runc" or "fake"; RuntimeVersion describes the runtime for
	// the Node's nodeInfo.
	Name() string
	RuntimeVersion(ctx context.Context) string
	// SupportsCDI reports whether CDIDevices are honoured; the node agent
	// advertises it as the label allot.dev/cdi.
	SupportsCDI() bool
	// Create prepares a container without starting it and returns its ID.
	// An error names what failed (unknown image, unresolvable CDI device).
	Create(ctx context.Context, spec ContainerSpec) (string, error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Status reports one container; ErrNotFound if it does not exist.
	Status(ctx context.Context, id string) (ContainerStatus, error)
	// Stop sends SIGTERM, waits up to grace, then SIGKILL; it returns once
	// the process has exited. Stopping an exited container is a no-op.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove deletes a stopped container and its resources (not its log).
	Remove(ctx context.Context, id string) error
	// List reports every container the runtime knows, running or not.
	List(ctx context.Context) ([]ContainerStatus, error)
}

// Releaser is implemented by runtimes whose exited containers still hold
// host resources: a runc container's overlay rootfs stays mounted until
// Remove. Release frees them but keeps the container's record, so that the
// next agent sees how the container ended and applies the pod's restart
// policy (as after a reboot). Releasing a running container is an error.
type Releaser interface {
	Release(ctx context.Context, id string) error
}
