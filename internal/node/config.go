package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/pkg/client"
)

// Defaults of Config.
const (
	DefaultMaxPods           = 110
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultNodeLeaseDuration and DefaultNodeStatusReportFrequency are
	// the kubelet's.
	DefaultNodeLeaseDuration         = 40 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultRelistInterval            = time.Second
	DefaultAPITimeout                = 30 * time.Second
)

// NodeDecorator adds to the Node the agent publishes, for example the
// extended resources of device plugins in capacity and allocatable. It is
// called at registration and before every heartbeat, from one goroutine,
// and must be fast (answer from memory). Call Agent.UpdateNodeStatus after
// a change to publish it before the next heartbeat.
type NodeDecorator interface {
	DecorateNode(node *corev1.Node)
}

// Config configures an Agent. Zero durations take defaults.
type Config struct {
	// DevicePluginDir, when set, runs a device manager that serves
	// Kubernetes device plugins (v1beta1) on DIR/kubelet.sock and hands
	// their devices to containers. DevicePluginGracePeriod is how long a
	// resource whose plugin went away stays in capacity (default 5m).
	DevicePluginDir         string
	DevicePluginGracePeriod time.Duration

	// PluginsRegistryDir, when set, runs a DRA manager that registers the
	// DRA drivers' kubelet plugins whose registration sockets appear in
	// it (the kubelet's default is v1alpha1.DefaultPluginsRegistryDir),
	// publishes their NodeResourceSlices and prepares the pods' resource
	// claims. DRASliceGracePeriod is how long the slice of a driver that
	// went away is kept (default 30s); DRAPrepareTimeout bounds each
	// prepare and unprepare call (default 30s); DRAPrepareBackoffInitial
	// and DRAPrepareBackoffMax bound the back-off between failed attempts
	// (defaults 1s and 2m).
	PluginsRegistryDir       string
	DRASliceGracePeriod      time.Duration
	DRAPrepareTimeout        time.Duration
	DRAPrepareBackoffInitial time.Duration
	DRAPrepareBackoffMax     time.Duration

	// UnhealthyDevicePolicy is what happens to a pod when a device it
	// holds is reported unhealthy, by a device plugin or as a DRA
	// driver's instance: FailPod (the default, seed 001) fails it, Report
	// only shows the health in its containers'
	// status.containerStatuses[].allocatedResourcesStatus. A plugin or
	// driver that goes away fails no pod under either policy.
	UnhealthyDevicePolicy UnhealthyDevicePolicy

	// PodResourcesSocket, when set, serves the kubelet's PodResources API
	// (v1: List, Get, GetAllocatableResources) on this unix socket, for
	// monitoring agents written for the kubelet. Empty disables it.
	PodResourcesSocket string
	// PodResourcesFallbackSocket, when set, is served instead when another
	// process (another cluster's agent on this host) already serves
	// PodResourcesSocket; that is then logged at info level, not as a
	// problem.
	PodResourcesFallbackSocket string

	// NodeName is the Node's name (a DNS subdomain). Required.
	NodeName string
	// Client talks to the API server with the node's identity (a node
	// token) or an admin one. Required.
	Client *client.Client
	// Runtime runs the containers. Required.
	Runtime runtime.Runtime
	// RootDir keeps container logs and pod checkpoints (package
	// podfiles). Empty keeps neither: for simulated nodes only.
	RootDir string

	// NodeIP is the InternalIP address; empty detects the address that
	// routes to the API server. Hostname is the Hostname address; empty is
	// the host's name.
	NodeIP   string
	Hostname string
	// Labels are added to the Node's, beside kubernetes.io/hostname,
	// kubernetes.io/os, kubernetes.io/arch and allot.dev/cdi.
	Labels map[string]string
	// Capacity overrides detected capacities (cpu, memory) and adds
	// others; MaxPods is the pods capacity (default 110).
	Capacity corev1.ResourceList
	MaxPods  int
	// NodeDecorators contribute to the published Node.
	NodeDecorators []NodeDecorator

	// LogListen is the log server's address (host:port, port 0 picks
	// one); empty runs no log server. LogTokens are the bearer tokens it
	// accepts besides the client's own; LogAllowAnonymous accepts
	// requests without one (loopback development only).
	LogListen         string
	LogTokens         []string
	LogAllowAnonymous bool

	// StopContainersOnExit stops the node's containers when the agent
	// exits (Run returns): SIGTERM, SIGKILL after ShutdownGracePeriod
	// (default 5s), then their rootfs is unmounted; their records stay,
	// and the next agent applies each pod's restart policy as after a
	// reboot. Unset, containers keep running for the next agent to adopt.
	StopContainersOnExit bool
	ShutdownGracePeriod  time.Duration

	// Hooks are the pod admission and container extension points.
	Hooks pods.Hooks
	// DisableStatusUpdates skips pod status writes (scheduler benchmarks);
	// DisableEvents skips events.
	DisableStatusUpdates bool
	DisableEvents        bool

	// HeartbeatInterval is how often the Node's Ready condition is renewed
	// (default 10s). RelistInterval is how often the runtime's containers
	// are listed to wake the workers of pods whose containers changed
	// (default 1s). APITimeout bounds each API call (default 30s).
	HeartbeatInterval time.Duration
	// NodeLeaseDuration is the leaseDurationSeconds of the node's heartbeat
	// Lease (kube-node-lease/NAME, renewed every HeartbeatInterval; default
	// 40s). NodeStatusReportFrequency is how often the Node's status is
	// written when nothing in it changed (default 5m): a change is written
	// at the next heartbeat.
	NodeLeaseDuration         time.Duration
	NodeStatusReportFrequency time.Duration
	RelistInterval            time.Duration
	APITimeout                time.Duration
	// SelfFenceAfter is the fence time: when the agent has not renewed its
	// heartbeat Lease for this long, it stops the pods that hold devices
	// other nodes can reach (and pods annotated allot.dev/fence=true) and
	// unprepares their claims, and the runc shims of their containers kill
	// them once ROOT/heartbeat is this old (selffence.go). The agent
	// records it on its Node (annotation allot.dev/self-fence-after) at
	// registration. Zero (or negative) disables the fence and records
	// none: the control plane then never releases the node's multi-node
	// claims before the node unprepares them. `allot node` defaults it to
	// fence.DefaultSelfFenceAfter (20s). It must exceed HeartbeatInterval.
	SelfFenceAfter time.Duration
	// Pods are the pod workers' timers: restart back-off, resync, grace
	// period cap, cleanup of finished pods.
	Pods pods.Timing

	// Metrics may be shared by several agents; nil creates one with its
	// own registry.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// UnhealthyDevicePolicy says what an unhealthy device does to the pods
// holding it.
type UnhealthyDevicePolicy string

// Unhealthy device policies.
const (
	// UnhealthyDeviceFailPod fails the pods holding the device, with
	// reason DeviceUnhealthy (pods.ReasonDeviceUnhealthy).
	UnhealthyDeviceFailPod UnhealthyDevicePolicy = "FailPod"
	// UnhealthyDeviceReport leaves the pods running and reports the
	// health in their status.
	UnhealthyDeviceReport UnhealthyDevicePolicy = "Report"
)

// ErrInvalidConfig is returned (wrapped) by New for a Config it cannot run.
var ErrInvalidConfig = errors.New("invalid node agent config")

func (c *Config) setDefaults() {
	if c.MaxPods <= 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.RelistInterval <= 0 {
		c.RelistInterval = DefaultRelistInterval
	}
	if c.NodeLeaseDuration <= 0 {
		c.NodeLeaseDuration = DefaultNodeLeaseDuration
	}
	if c.NodeStatusReportFrequency <= 0 {
		c.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
	}
	if c.ShutdownGracePeriod <= 0 {
		c.ShutdownGracePeriod = DefaultShutdownGracePeriod
	}
	if c.APITimeout <= 0 {
		c.APITimeout = DefaultAPITimeout
	}
	if c.UnhealthyDevicePolicy == "" {
		c.UnhealthyDevicePolicy = UnhealthyDeviceFailPod
	}
	if c.Pods.APITimeout <= 0 {
		c.Pods.APITimeout = c.APITimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New(nil)
	}
}

func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("%w: a node name is required", ErrInvalidConfig)
	case len(validation.IsDNS1123Subdomain(c.NodeName)) > 0:
		return fmt.Errorf("%w: node name %q is not a DNS subdomain", ErrInvalidConfig, c.NodeName)
	case c.Client == nil:
		return fmt.Errorf("%w: a client is required", ErrInvalidConfig)
	case c.Runtime == nil:
		return fmt.Errorf("%w: a runtime is required", ErrInvalidConfig)
	case c.LogListen != "" && c.RootDir == "":
		return fmt.Errorf("%w: a log server needs a root directory", ErrInvalidConfig)
	case c.SelfFenceAfter > 0 && c.SelfFenceAfter <= c.heartbeatInterval():
		return fmt.Errorf("%w: self-fence-after %v must exceed the heartbeat interval %v", ErrInvalidConfig, c.SelfFenceAfter, c.heartbeatInterval())
	case c.UnhealthyDevicePolicy != "" && c.UnhealthyDevicePolicy != UnhealthyDeviceFailPod && c.UnhealthyDevicePolicy != UnhealthyDeviceReport:
		return fmt.Errorf("%w: unhealthy device policy %q: want %s or %s", ErrInvalidConfig,
			c.UnhealthyDevicePolicy, UnhealthyDeviceFailPod, UnhealthyDeviceReport)
	}
	return nil
}

// heartbeatInterval is HeartbeatInterval or its default.
func (c *Config) heartbeatInterval() time.Duration {
	if c.HeartbeatInterval <= 0 {
		return DefaultHeartbeatInterval
	}
	return c.HeartbeatInterval
}
