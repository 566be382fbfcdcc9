package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/fence"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime"
)

// The self-fence (docs/decisions.md, "Fencing"): when the agent has not
// renewed its heartbeat Lease for Config.SelfFenceAfter, it fails the
// pods that hold devices other nodes can reach (and the pods that opt in
// with the annotation fence.AnnotationPodFence), which stops their
// containers (grace capped at FenceStopGrace) and unprepares their
// claims; it stops nothing else. The control plane releases such claims
// only once the node's last heartbeat is older than the fence time plus a
// margin. The agent also touches ROOT/HeartbeatFile after every renewal:
// the runc shims of fenced containers kill them once it is older than the
// fence time, so the fence holds while the agent itself is not running.

// HeartbeatFile is the agent's local heartbeat, in its root directory.
const HeartbeatFile = "heartbeat"

// ReasonFenced is the status.reason of a pod the self-fence stopped.
const ReasonFenced = "NodeFenced"

// FenceStopGrace caps the grace period of the containers the self-fence
// stops: the claim controller's margin (5 s by default) must cover it.
const FenceStopGrace = 2 * time.Second

// selfFence is the agent's fence. renewed runs on the goroutine that
// registers and heartbeats, check on the fence's loop, PodFailure,
// ContainerOptions and fencedAPI on pod workers; mu guards the state.
type selfFence struct {
	after time.Duration
	file  string // "" without a root directory
	// multi reports whether a pod holds a claim on devices other nodes
	// can reach (the DRA manager's); nil without DRA.
	multi func(types.UID) bool
	poke  func()
	log   func(msg string, args ...any)
	// raised and stopped count fences raised and pods failed by them
	// (the agent's metrics); nil: not counted.
	raised, stopped prometheus.Counter

	mu     sync.Mutex
	lastOK time.Time
	fenced bool
	// epoch ends when the fence is raised (a new one begins when it is
	// lowered): the pod workers' API calls end with it (fencedAPI).
	epoch    context.Context
	endEpoch context.CancelFunc
	// failed are the pods failed since the fence was raised, counted once
	// each however often their workers ask.
	failed map[types.UID]bool
}

// errFenced ends the pod workers' API calls when the fence is raised.
var errFenced = errors.New("the node's fence is raised: no heartbeat reached the API server for the fence time")

func newSelfFence(after time.Duration) *selfFence {
	f := &selfFence{after: after, failed: map[types.UID]bool{}}
	f.epoch, f.endEpoch = context.WithCancel(context.Background())
	return f
}

// renewed records a heartbeat, stamped now, that reached the API server.
func (f *selfFence) renewed(now time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	if now.After(f.lastOK) {
		f.lastOK = now
	}
	was := f.fenced
	f.fenced = false
	if was {
		f.epoch, f.endEpoch = context.WithCancel(context.Background())
		clear(f.failed)
	}
	f.mu.Unlock()
	if was {
		f.log("heartbeat renewed: the fence is lifted for new pods")
	}
	if f.file == "" {
		return
	}
	if err := touch(f.file, now); err != nil {
		f.log("touch the local heartbeat", "file", f.file, "err", err)
	}
}

// check raises the fence once the last renewal is older than the fence
// time, and wakes every pod worker so the fenced pods stop.
func (f *selfFence) check(now time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	raise := !f.fenced && !f.lastOK.IsZero() && now.Sub(f.lastOK) > f.after
	if raise {
		f.fenced = true
		f.endEpoch()
	}
	last := f.lastOK
	f.mu.Unlock()
	if raise {
		inc(f.raised)
		f.log("no heartbeat reached the API server for the fence time: stopping the pods that hold devices other nodes can reach",
			"lastHeartbeat", last, "fenceAfter", f.after)
		f.poke()
	}
}

// applies reports whether the pod is fenced.
func (f *selfFence) applies(pod *corev1.Pod) bool {
	return fence.PodOptsIn(pod) || (f.multi != nil && f.multi(pod.UID))
}

// PodFailure fails a fenced pod while the fence is raised.
func (f *selfFence) PodFailure(pod *corev1.Pod) *pods.Failure {
	f.mu.Lock()
	fenced, last := f.fenced, f.lastOK
	f.mu.Unlock()
	if !fenced || !f.applies(pod) {
		return nil
	}
	f.mu.Lock()
	first := !f.failed[pod.UID]
	f.failed[pod.UID] = true
	f.mu.Unlock()
	if first {
		inc(f.stopped)
	}
	grace := FenceStopGrace
	return &pods.Failure{Reason: ReasonFenced, Grace: &grace, Message: fmt.Sprintf(
		"the node could not reach the API server since %s (fence time %s): a pod holding devices other nodes can reach is stopped",
		last.UTC().Format(time.RFC3339), f.after)}
}

// ContainerOptions gives the containers of fenced pods their fence, for
// the runtime to enforce while the agent is down.
func (f *selfFence) ContainerOptions(_ context.Context, pod *corev1.Pod, _ *corev1.Container) (pods.ContainerOptions, error) {
	if f.file == "" || !f.applies(pod) {
		return pods.ContainerOptions{}, nil
	}
	return pods.ContainerOptions{Fence: &runtime.Fence{HeartbeatFile: f.file, After: f.after}}, nil
}

var (
	_ pods.Monitor             = (*selfFence)(nil)
	_ pods.ContainerConfigurer = (*selfFence)(nil)
	_ pods.API                 = fencedAPI{}
)

// fencedAPI is the pod workers' API with calls that end when the fence is
// raised (and fail at once while it is): a worker waiting on an API call
// cut by a partition (up to the API timeout) would not stop its fenced
// pod and unprepare its claims within the fence time plus the control
// plane's margin.
type fencedAPI struct {
	pods.API
	f *selfFence
}

func (a fencedAPI) call(ctx context.Context) (context.Context, context.CancelFunc) {
	a.f.mu.Lock()
	epoch := a.f.epoch
	a.f.mu.Unlock()
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(epoch, func() { cancel(errFenced) })
	return cctx, func() { stop(); cancel(nil) }
}

func (a fencedAPI) UpdatePodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	ctx, done := a.call(ctx)
	defer done()
	return a.API.UpdatePodStatus(ctx, pod)
}

func (a fencedAPI) GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	ctx, done := a.call(ctx)
	defer done()
	return a.API.GetPod(ctx, ns, name)
}

func (a fencedAPI) DeletePod(ctx context.Context, ns, name string, uid types.UID) error {
	ctx, done := a.call(ctx)
	defer done()
	return a.API.DeletePod(ctx, ns, name, uid)
}

// fenceLoop checks the fence every tenth of the fence time (at most a
// second) until ctx ends.
func (f *selfFence) loop(ctx context.Context) {
	if f == nil {
		return
	}
	t := time.NewTicker(min(f.after/10, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f.check(now)
		}
	}
}

func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// touch sets the file's modification time to now, creating it.
func touch(path string, now time.Time) error {
	err := os.Chtimes(path, now, now)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	return os.Chtimes(path, now, now)
}
