package pods

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/metrics"
	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/runtime"
)

// API is what a pod worker asks of the API server.
type API interface {
	// UpdatePodStatus writes pods/NAME/status and returns the stored pod.
	UpdatePodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// GetPod reads a pod.
	GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error)
	// DeletePod completes a pod's deletion: DELETE with gracePeriodSeconds
	// 0 and a UID precondition.
	DeletePod(ctx context.Context, ns, name string, uid types.UID) error
}

// EventRecorder records events about pods; client.EventRecorder is one.
type EventRecorder interface {
	Eventf(obj k8sruntime.Object, typ, reason, format string, args ...any)
}

// Timing holds every delay of pod workers; zero fields take defaults.
type Timing struct {
	// RestartBackoffInitial and RestartBackoffMax bound the restart
	// back-off (defaults 10s and 5m).
	RestartBackoffInitial time.Duration
	RestartBackoffMax     time.Duration
	// Resync is how often a pod that has not finished is synced without
	// news (default 10s); the agent's relist wakes workers on changes.
	Resync time.Duration
	// Retry is the delay after a failed API or runtime call (default 1s).
	Retry time.Duration
	// AdmitRetry is how often a held pod is offered to the admitters
	// again (default 5s).
	AdmitRetry time.Duration
	// TerminatedCleanup is how long the containers of a finished pod are
	// kept before they are removed (default 1m); the status stays.
	TerminatedCleanup time.Duration
	// MaxGracePeriod caps the termination grace period (0: no cap).
	MaxGracePeriod time.Duration
	// APITimeout bounds each API call (default 30s), RuntimeTimeout each
	// runtime call other than Stop (default 2m).
	APITimeout     time.Duration
	RuntimeTimeout time.Duration
}

func (t *Timing) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.RestartBackoffInitial, 10*time.Second)
	def(&t.RestartBackoffMax, 5*time.Minute)
	def(&t.Resync, 10*time.Second)
	def(&t.Retry, time.Second)
	def(&t.AdmitRetry, 5*time.Second)
	def(&t.TerminatedCleanup, time.Minute)
	def(&t.APITimeout, 30*time.Second)
	def(&t.RuntimeTimeout, 2*time.Minute)
	if t.RestartBackoffMax < t.RestartBackoffInitial {
		t.RestartBackoffMax = t.RestartBackoffInitial
	}
}

// Config is shared by the workers of one node agent; it must not change
// once a worker runs.
type Config struct {
	NodeName string
	// HostIP is reported as status.hostIP and, since allot sets up no pod
	// network, as status.podIP.
	HostIP string
	// RootDir holds logs and checkpoints (package podfiles); empty keeps
	// neither (simulated nodes).
	RootDir string
	Runtime runtime.Runtime
	API     API
	// Events may be nil.
	Events  EventRecorder
	Hooks   Hooks
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// StatusUpdates disables pod status writes when false; deletions are
	// still completed.
	StatusUpdates bool
	Timing        Timing
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// SetDefaults fills empty fields.
func (c *Config) SetDefaults() {
	c.Timing.setDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New(nil)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Snapshot is an immutable view of a pod's containers, published after
// every sync for readers outside the worker (the log server).
type Snapshot struct {
	Key        podfiles.PodKey
	Containers map[string]ContainerSnapshot
}

// ContainerSnapshot is what the log server needs of one container.
type ContainerSnapshot struct {
	// Attempt is the current attempt (its log is Attempt.log).
	Attempt int
	// Running is true while the current attempt's process may still write
	// to its log.
	Running bool
}

// Worker owns one pod: it is the only goroutine that starts, stops or
// removes the pod's containers and writes its status. The dispatcher feeds
// it with Update, Gone and Poke; Run does the work.
type Worker struct {
	cfg *Config
	uid types.UID
	log *slog.Logger

	// Mailbox, written by the dispatcher and taken by Run.
	mu       sync.Mutex
	nextPod  *corev1.Pod
	goneMail bool
	wake     chan struct{}

	snap atomic.Pointer[Snapshot]
	done chan struct{}

	// Everything below is owned by the goroutine running Run.
	state
}

// New creates the worker of pod. existing are the runtime's containers of
// this pod found when the agent started (adopted, not restarted).
func New(cfg *Config, pod *corev1.Pod, existing []runtime.ContainerStatus) *Worker {
	w := &Worker{
		cfg: cfg, uid: pod.UID,
		log:  cfg.Logger.With("pod", pod.Namespace+"/"+pod.Name, "uid", string(pod.UID)),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	w.pod = pod
	w.existing = existing
	w.key = podfiles.PodKey{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
	w.snap.Store(&Snapshot{Key: w.key})
	return w
}

// UID is the worker's pod UID.
func (w *Worker) UID() types.UID { return w.uid }

// Update hands the worker a newer version of its pod.
func (w *Worker) Update(pod *corev1.Pod) {
	w.mu.Lock()
	w.nextPod = pod
	w.mu.Unlock()
	w.Poke()
}

// Gone tells the worker its pod no longer exists in the API: it stops and
// removes the containers and ends.
func (w *Worker) Gone() {
	w.mu.Lock()
	w.goneMail = true
	w.mu.Unlock()
	w.Poke()
}

// Poke asks for a sync, for example after the runtime's containers of
// the pod changed.
func (w *Worker) Poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Done is closed when Run has returned.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Snapshot returns the latest published view of the pod's containers.
func (w *Worker) Snapshot() *Snapshot { return w.snap.Load() }

// Run syncs the pod until its deletion is complete or ctx ends. On ctx's
// end the containers are left running, for the next agent to adopt.
func (w *Worker) Run(ctx context.Context) {
	defer close(w.done)
	w.cfg.Metrics.Workers.Inc()
	defer w.cfg.Metrics.Workers.Dec()
	defer w.setRunningMetric(false)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		w.takeMail()
		next := w.Sync(ctx)
		if w.finished || ctx.Err() != nil {
			return
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(w.cfg.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
	}
}

// takeMail moves the mailbox into the worker's state.
func (w *Worker) takeMail() {
	w.mu.Lock()
	p, gone := w.nextPod, w.goneMail
	w.nextPod = nil
	w.mu.Unlock()
	if p != nil {
		w.setPod(p)
	}
	if gone {
		w.gone = true
	}
}

// setPod keeps the newer of the worker's pod and p, so that an informer
// event older than the worker's own last write does not roll it back.
func (w *Worker) setPod(p *corev1.Pod) {
	if p.UID != w.uid {
		return
	}
	if w.pod != nil && olderRV(p.ResourceVersion, w.pod.ResourceVersion) {
		return
	}
	w.pod = p
}

// olderRV reports whether resourceVersion a is older than b. allot's
// resource versions are etcd revisions; anything else compares as newer.
func olderRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

func (w *Worker) setRunningMetric(running bool) {
	if running == w.countedRunning {
		return
	}
	w.countedRunning = running
	if running {
		w.cfg.Metrics.PodsRunning.Inc()
	} else {
		w.cfg.Metrics.PodsRunning.Dec()
	}
}

func (w *Worker) event(typ, reason, format string, args ...any) {
	if w.cfg.Events != nil {
		w.cfg.Events.Eventf(w.pod, typ, reason, format, args...)
	}
}
