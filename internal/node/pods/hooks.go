package pods

import (
	"context"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/runtime"
)

// Verdict is an Admitter's answer.
type Verdict int

// Verdicts.
const (
	// Admit lets the pod's containers be created.
	Admit Verdict = iota
	// Hold keeps the pod Pending, with the reason in its containers'
	// waiting state and a Warning event whenever the reason or message
	// changes, and asks again after the admission retry interval (or at
	// the pod's next update, or when the worker is poked).
	Hold
	// Reject fails the pod: phase Failed with the reason. It is final.
	Reject
)

func (v Verdict) String() string {
	switch v {
	case Admit:
		return "admit"
	case Hold:
		return "hold"
	case Reject:
		return "reject"
	}
	return "unknown"
}

// Admission is an Admitter's decision with its explanation. Reason is a
// short CamelCase word (it becomes the pod's status.reason on Reject, and
// the containers' waiting reason on Hold); Message is a sentence.
type Admission struct {
	Verdict Verdict
	Reason  string
	Message string
}

// Admitted is the Admission that lets a pod start.
func Admitted() Admission { return Admission{Verdict: Admit} }

// HoldPod keeps a pod Pending for now.
func HoldPod(reason, message string) Admission {
	return Admission{Verdict: Hold, Reason: reason, Message: message}
}

// RejectPod fails a pod.
func RejectPod(reason, message string) Admission {
	return Admission{Verdict: Reject, Reason: reason, Message: message}
}

// Admitter is consulted before a pod worker creates its first container
// (so again after an agent restart, before the pod's next container
// creation; adopted running containers are not re-admitted). The device manager
// allocates devices here, the DRA manager waits for the pod's claims to be
// allocated and reserved and prepares them. Admitters run in order; the
// first that does not admit decides. The pod must not be modified.
// Admitters are called from many pod workers at once and must honour
// ctx's deadline.
type Admitter interface {
	Admit(ctx context.Context, pod *corev1.Pod) Admission
}

// Releaser is optionally implemented by an Admitter that holds resources
// for a pod: Release is called once all the pod's containers have stopped
// for good (the pod was deleted, or finished), before the agent completes
// the pod's deletion. It is called for every pod the admitters were asked
// about, also one that was held or rejected: an earlier admitter may have
// acquired resources for it. An error is retried after a back-off; the
// deletion waits for it. Release must be idempotent: after an agent
// restart it is called for any pod that ran, even if an earlier agent
// released it already.
type Releaser interface {
	Release(ctx context.Context, pod *corev1.Pod) error
}

// RetryAfter is implemented by Release errors that know when the next
// attempt is worth making (the Releaser's own back-off): the worker waits
// until then (or a wake-up) instead of its Retry interval, and logs only
// the errors of real attempts, not of calls answered "still backing off".
type RetryAfter interface {
	RetryAt() time.Time
	// BackingOff reports that no attempt was made.
	BackingOff() bool
}

// ContainerOptions are additions to one container, from device plugins'
// Allocate responses and prepared DRA claims.
type ContainerOptions struct {
	Env         []string // KEY=VALUE, after the pod's own env
	Mounts      []runtime.Mount
	Devices     []runtime.Device
	Annotations map[string]string
	CDIDevices  []string
	// Fence, when any configurer sets it, is the container's fence
	// (runtime.ContainerSpec.Fence).
	Fence *runtime.Fence
}

// ContainerConfigurer adds options to a container just before it is
// created (every attempt). An error fails this attempt with reason
// CreateContainerConfigError; it is retried with back-off.
type ContainerConfigurer interface {
	ContainerOptions(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (ContainerOptions, error)
}

// HealthReporter reports the health of the devices a container holds, for
// its status' allocatedResourcesStatus. It is called on every status
// computation and must answer from memory, fast.
type HealthReporter interface {
	AllocatedResourcesStatus(pod *corev1.Pod, container string) []corev1.ResourceStatus
}

// ReasonDeviceUnhealthy is the status.reason of a pod that a Monitor
// failed because a device it holds went unhealthy.
const ReasonDeviceUnhealthy = "DeviceUnhealthy"

// Failure is why a Monitor fails a pod: Reason (CamelCase) becomes the
// pod's status.reason, Message (a sentence) its status.message. Grace,
// when set, caps the grace period its containers are stopped with (the
// node's fence must stop them within a bound).
type Failure struct {
	Reason  string
	Message string
	Grace   *time.Duration
}

// Monitor watches what a pod holds while it lives: it is asked on every
// sync of a pod that has neither finished nor is being deleted, before
// anything is started, whether the pod must fail now (for example
// because a device it holds was reported unhealthy). A non-nil Failure
// fails the pod as an Admitter's Reject does: phase Failed, its
// containers stopped, its resources released. It is final. Monitors run
// in order; the first failure decides. They are called from many pod
// workers at once, must answer from memory, fast, and must not modify
// the pod. A component that wants a pod checked at once (a device's
// health changed) pokes its worker.
type Monitor interface {
	PodFailure(pod *corev1.Pod) *Failure
}

// Hooks are the extension points of pod workers. Every field may be empty.
type Hooks struct {
	Admitters   []Admitter
	Configurers []ContainerConfigurer
	// HealthReporters' answers are concatenated, in order.
	HealthReporters []HealthReporter
	Monitors        []Monitor
}
